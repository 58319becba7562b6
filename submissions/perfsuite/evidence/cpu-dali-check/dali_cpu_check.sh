set -euo pipefail
cd /work/main
export PERFSUITE_DB=sqlite:////tmp/dalicpu/r.db PERFSUITE_RECORDS=/tmp/dalicpu/records PERFSUITE_CACHE=/tmp/dalicpu/cache
mkdir -p /tmp/dalicpu; echo "commit $(git rev-parse --short HEAD), $(nproc) cores, DALI $(.venv/bin/python -c "import nvidia.dali as d; print(d.__version__)")"
ds=$(.venv/bin/python -c 'from suite import datasets as d; print(d.jpeg_images(d.JpegSpec(count=512)).root)')
echo "dataset $ds"
for i in 1 2 3 4; do
  .venv/bin/python -m suite run data.image_pipeline -p paths=dali_cpu -p count=512 -p workers=2 -p epochs=8 --device cpu --seed 0 2>&1 | grep -E "dali_cpu|run_id|Error" | head -3
  .venv/bin/python bench/dali_reference.py "$ds" --device cpu --decoder cpu --threads 2 --epochs 8 --json /tmp/dalicpu/ref-$i.json
done
