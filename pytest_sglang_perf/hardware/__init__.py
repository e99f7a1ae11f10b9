"""The GPUs this machine has and how fast they read memory: what a decode step's ceiling is measured against.

`probe.probe_in_subprocess()` runs `python -m pytest_sglang_perf.hardware --json` in a child process, so that no
CUDA context stays in the pytest process (it would hold GPU memory SGLang's memory plan counts on). The child reads
each GPU's facts (`facts.py`: torch, else NVML through nvidia-ml-py) and times a short HBM read per GPU model
(`bandwidth.py`). Nothing here imports torch or pynvml at module level; both are optional (`pip install
'pytest-sglang-perf[probe]'`), and a machine without them, or without a GPU, gets a report that says why nothing was
measured. docs/gpu-probe.md describes the measurement and what its number means.
"""
