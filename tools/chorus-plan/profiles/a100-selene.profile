# chorus-plan machine profile: the cluster of arXiv 2104.04473 (Megatron-LM, Selene): DGX A100
# hosts of 8 GPUs, NVLink/NVSwitch inside a host, 8 x 200 Gb/s HDR InfiniBand per host (one
# 200 Gb/s port per GPU). Published hardware figures, not measured: every link value is assumed.
name a100-selene
precision bf16
peak_tflops 312          # A100 bf16 dense peak
efficiency 1             # of the matrix products: fitted by the Megatron check (docs/planner.md)
memory_gib 80
memory_gb_per_s 2039     # A100 80GB SXM HBM2e: element-wise kernels
shm.alpha_us 5           # NVLink: latency of one NCCL step (assumed)
shm.beta_ns_per_byte 0.00333333  # 300 GB/s per direction per GPU
arena.alpha_us 5
arena.beta_ns_per_byte 0.00333333
tcp.alpha_us 10          # InfiniBand (assumed)
tcp.beta_ns_per_byte 0.04        # 200 Gb/s = 25 GB/s per GPU
tcp.links_per_host 8             # one port per GPU
gamma_ns_per_byte 0.0005         # HBM2e, about 2 TB/s
