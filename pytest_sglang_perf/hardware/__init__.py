"""The GPUs this machine has, how fast they read memory and how fast they multiply bf16 matrices: what a decode
step's ceiling (bandwidth) and a prefill's (GEMM rate) are measured against.

`probe.probe_in_subprocess()` runs `python -m pytest_sglang_perf.hardware --json` in a child process, so that no
CUDA context stays in the pytest process (it would hold GPU memory SGLang's memory plan counts on). The child reads
each GPU's facts (`facts.py`: torch, else NVML through nvidia-ml-py) and times, per GPU model, a short HBM read
(`bandwidth.py`) and then a large bf16 matmul (`gemm.py`). Nothing here imports torch or pynvml at module level;
both are optional (`pip install 'pytest-sglang-perf[probe]'`), and a machine without them, or without a GPU, gets a
report that says why nothing was measured. docs/gpu-probe.md describes the measurements and what their numbers mean.
"""
