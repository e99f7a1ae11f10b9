"""Root conftest: pytester for the plugin's own tests (pytester runs of real test files)."""

pytest_plugins = ["pytester"]
