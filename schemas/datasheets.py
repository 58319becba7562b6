"""Vendor datasheet peaks of common data-centre GPUs, shown beside the measured ceilings,
and the bound the registry holds stored figures to (perfsuite.schemas.physics): one table
for both, here because the registry may import nothing of the host but ``perfsuite.schemas``.

A measured ceiling says what this machine delivers; the datasheet says what the part is
sold as. Both belong in a table: "% of measured ceiling" judges the workload, "% of spec"
judges the machine (an H200 whose bf16 GEMM reaches 78% of spec is normal; 50% is not).

Figures are *dense* (NVIDIA's tensor-core figures are printed "with sparsity": the dense
figure is half of it, as the datasheets' footnotes say), in TFLOP/s per GPU; memory
bandwidth in GB/s (the datasheets' TB/s x 1000); NVLink in GB/s per direction (the
datasheets print the bidirectional total, twice that). ``None``: the datasheet gives no
figure. Sources, each NVIDIA's own datasheet:

- A100 SXM 80GB: "NVIDIA A100 Tensor Core GPU" datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4):
  FP64 9.7, FP64 TC 19.5, FP32 19.5, TF32 TC 156 (312 sparse), BF16/FP16 TC 312 (624 sparse),
  HBM2e 2,039 GB/s, NVLink 600 GB/s.
- H100 SXM and H100 PCIe: "NVIDIA H100 Tensor Core GPU" datasheet (h100-datasheet-2430615):
  SXM: FP64 34, FP64 TC 67, FP32 67, TF32 TC 989*, BF16/FP16 TC 1,979*, FP8 TC 3,958*
  (* with sparsity), HBM3 3.35 TB/s, NVLink 900 GB/s; PCIe: FP64 26, FP64 TC 51, FP32 51,
  TF32 756*, BF16/FP16 1,513*, FP8 3,026*, HBM2e 2 TB/s, NVLink bridge 600 GB/s.
- H200 SXM: "NVIDIA H200 Tensor Core GPU" datasheet (h200-datasheet-3002446): FP64 34,
  FP64 TC 67, FP32 67, TF32 TC 989*, BF16/FP16 TC 1,979*, FP8 TC 3,958*, HBM3e 4.8 TB/s,
  NVLink 900 GB/s.
- B200: "NVIDIA HGX B200" datasheet (hgx-b200 datasheet, 8 GPUs; per GPU = total / 8):
  FP64/FP64 TC 296 TF total (37), TF32 TC 18 PF* (1,125 dense), BF16/FP16 TC 36 PF*
  (2,250 dense), FP8 TC 72 PF* (4,500 dense), HBM3e 64 TB/s total (8,000), NVLink 1.8 TB/s
  per GPU; no FP32 (non-tensor) figure printed.
"""

from __future__ import annotations

from dataclasses import dataclass

# measured ceiling resource -> the datasheet field it is compared with
RESOURCE_FIELDS = {
    "matmul.fp64": "fp64",
    "matmul.fp32": "fp32",
    "matmul.tf32": "tf32",
    "matmul.bf16": "bf16",
    "matmul.fp16": "fp16",
    "matmul.fp8": "fp8",
    "memory": "memory_gbps",
    "p2p": "nvlink_gbps",
}


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's datasheet peaks: dense TFLOP/s per precision, GB/s of memory and NVLink."""

    name: str
    source: str
    fp64: float | None  # FP64 tensor core where the part has one (what a DGEMM can reach)
    fp32: float | None  # FP32 without tensor cores (torch's fp32 matmul at "highest" precision)
    tf32: float | None
    bf16: float | None
    fp16: float | None
    fp8: float | None
    memory_gbps: float | None
    nvlink_gbps: float | None  # per direction

    def peak(self, resource: str) -> float | None:
        field = RESOURCE_FIELDS.get(resource)
        return getattr(self, field) if field else None


A100_SXM_80GB = GpuSpec(
    "A100 SXM 80GB",
    "NVIDIA A100 Tensor Core GPU datasheet",
    fp64=19.5,
    fp32=19.5,
    tf32=156.0,
    bf16=312.0,
    fp16=312.0,
    fp8=None,
    memory_gbps=2039.0,
    nvlink_gbps=300.0,
)
H100_SXM = GpuSpec(
    "H100 SXM",
    "NVIDIA H100 Tensor Core GPU datasheet (SXM column)",
    fp64=67.0,
    fp32=67.0,
    tf32=494.5,
    bf16=989.5,
    fp16=989.5,
    fp8=1979.0,
    memory_gbps=3350.0,
    nvlink_gbps=450.0,
)
H100_PCIE = GpuSpec(
    "H100 PCIe",
    "NVIDIA H100 Tensor Core GPU datasheet (PCIe column)",
    fp64=51.0,
    fp32=51.0,
    tf32=378.0,
    bf16=756.5,
    fp16=756.5,
    fp8=1513.0,
    memory_gbps=2000.0,
    nvlink_gbps=300.0,
)
H200_SXM = GpuSpec(
    "H200 SXM",
    "NVIDIA H200 Tensor Core GPU datasheet (SXM column)",
    fp64=67.0,
    fp32=67.0,
    tf32=494.5,
    bf16=989.5,
    fp16=989.5,
    fp8=1979.0,
    memory_gbps=4800.0,
    nvlink_gbps=450.0,
)
B200 = GpuSpec(
    "B200",
    "NVIDIA HGX B200 datasheet (8-GPU totals / 8)",
    fp64=37.0,
    fp32=None,
    tf32=1125.0,
    bf16=2250.0,
    fp16=2250.0,
    fp8=4500.0,
    memory_gbps=8000.0,
    nvlink_gbps=900.0,
)

SPECS = (A100_SXM_80GB, H100_SXM, H100_PCIE, H200_SXM, B200)
FLOPS_FIELDS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
BANDWIDTH_FIELDS = ("memory_gbps", "nvlink_gbps")


def highest(spec: GpuSpec, fields: tuple[str, ...]) -> float | None:
    """The highest of ``spec``'s figures among ``fields`` (None where it prints none of them)."""
    figures = [getattr(spec, f) for f in fields if getattr(spec, f) is not None]
    return max(figures) if figures else None


def lookup(device_name: str | None) -> GpuSpec | None:
    """The datasheet of a device by the name torch / NVML give it ("NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA B200"), or None
    for a part not in the table (an unknown part is never guessed: H100 NVL, H200 NVL and
    A100 40GB differ in clocks, power or memory)."""
    if not device_name:
        return None
    n = device_name.upper().replace("-", " ")
    if "NVL" in n.split():
        return None
    if "A100" in n:
        return A100_SXM_80GB if "SXM" in n and "80GB" in n else None
    if "H100" in n:
        if "PCIE" in n:
            return H100_PCIE
        return H100_SXM if "SXM" in n or "HBM3" in n else None
    if "H200" in n:
        return H200_SXM
    if "B200" in n:
        return B200
    return None


def spec_fraction(device_name: str | None, resource: str, value: float) -> tuple[float, GpuSpec] | None:
    """(value / datasheet peak, the datasheet) for a figure of ``resource``, or None."""
    spec = lookup(device_name)
    peak = spec.peak(resource) if spec else None
    if spec is None or not peak:
        return None
    return value / peak, spec
