# -*- Python -*-
# lit configuration for the Stagecraft IR and tool tests.

import os
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "STAGECRAFT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.stagecraft_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%stagecraft_src", config.stagecraft_src_root))
config.substitutions.append(("%examples", os.path.join(config.stagecraft_src_root, "examples")))

llvm_config.use_default_substitutions()
# Our tools first, then LLVM's, then the system's (timeout, mpirun); and
# what Open MPI reads at start-up.
llvm_config.with_system_environment(["HOME", "TMPDIR", "USER"])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.stagecraft_tools_dir, append_path=True)

tools = ["stagecraft-opt", "stagecraft-translate", "stagecraft-run", "FileCheck", "not", "count"]
llvm_config.add_tool_substitutions(tools, [config.stagecraft_tools_dir, config.llvm_tools_dir])

# kind=ilp's tests run where the build has its solver (CBC).
if config.stagecraft_have_cbc:
    config.available_features.add("ilp")

# MPI tests run when the build has the mpi backend and mpirun exists. As root
# (CI), Open MPI needs --allow-run-as-root; two cores need --oversubscribe.
import shutil
if config.stagecraft_have_mpi and shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe"))

# CUDA: `cuda-build` when the cuda backend is built; `gpu` when a device is
# also visible (nvidia-smi lists one), `gpus-2` when two are. Without a GPU
# the GPU tests show as UNSUPPORTED and cuda-no-device.test checks the
# error instead.
if config.stagecraft_have_cuda:
    config.available_features.add("cuda-build")
    if config.stagecraft_have_nccl:
        config.available_features.add("nccl")
    import subprocess
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                text=True, timeout=30)
        gpus = listed.stdout.count("GPU ") if listed.returncode == 0 else 0
        if gpus >= 1:
            config.available_features.add("gpu")
        if gpus >= 2:
            config.available_features.add("gpus-2")
    except (OSError, subprocess.SubprocessError):
        pass
