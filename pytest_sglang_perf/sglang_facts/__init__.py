"""What this project knows about SGLang, per version, as data: its flag table and parser, its rules (flag
combinations, how `/server_info` reports a flag, resolution messages, boot failures) and the GPU table.

Read by the plugin and by the simulator alike; it imports nothing else of the package. The facts are described,
with the SGLang source file each comes from, in docs/sglang-0.5.23.md; the data lives in `data/`.
"""
