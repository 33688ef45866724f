"""What implements a plan, as files a team reviews and applies (`gpuwatch plan --out DIR`
writes them under `DIR/apply/`): one module per file.

- `mig_parted.py`: `mig-configs.yaml`, NVIDIA mig-parted's config (MIG layout per node);
- `device_plugin.py`: `device-plugin-configs.yaml`, the device plugin's configs (MIG
  strategy, time-slicing) as the GPU operator's ConfigMap;
- `dra.py`: `dra-claims.yaml`, DRA's claims (MIG profiles, one shared claim per shared
  GPU) for nodes whose workloads hold GPUs through NVIDIA's DRA driver;
- `nodes.py`: `nodes.yaml`, nodes to add and remove per instance type, with labels;
- `workloads.py`: `workloads.yaml`, each workload's resource request change (and vLLM's
  `--gpu-memory-utilization`);
- `migration.py`: `migration.yaml`, the order that never leaves a workload without a place;
- `evidence.py`: `evidence.yaml`, the evidence behind each planned GPU.

`layout.py` decides which node each planned GPU lands on; `yaml_text.py` writes YAML with
every string quoted (names are data). `files.py` puts them together. No I/O but `files.write_apply`.
"""
