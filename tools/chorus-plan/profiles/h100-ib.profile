# chorus-plan machine profile for the paper-scale runs of docs/planner.md: hosts of 8 H100 SXM
# GPUs, NVLink 4 inside a host (450 GB/s per direction per GPU), one 400 Gb/s InfiniBand NDR port
# per GPU between hosts. Published hardware figures, not measured: every value is assumed.
name h100-ib
precision bf16
peak_tflops 989          # H100 SXM bf16 dense peak
efficiency 0.45
memory_gib 80
memory_gb_per_s 3350     # H100 SXM HBM3: element-wise kernels
shm.alpha_us 5
shm.beta_ns_per_byte 0.00222222  # 450 GB/s
arena.alpha_us 5
arena.beta_ns_per_byte 0.00222222
tcp.alpha_us 10
tcp.beta_ns_per_byte 0.02        # 400 Gb/s = 50 GB/s per GPU
tcp.links_per_host 8             # one port per GPU
gamma_ns_per_byte 0.0003         # HBM3, about 3.3 TB/s
