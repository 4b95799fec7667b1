"""Names NVIDIA's device plugin and GPU feature discovery give GPUs on Kubernetes nodes."""

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
