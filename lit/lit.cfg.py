# lit configuration for hfta's IR and command-line tests.
import os

import lit.formats

config.name = "hfta"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.hfta_tools_dir), "lit")

# The autotuner's choices and hfta-tune's plans: the build's, not the user's cache.
config.environment["HFTA_CACHE_DIR"] = os.path.join(config.test_exec_root, "hfta-cache")
config.environment["PATH"] = os.pathsep.join(
    [config.hfta_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%models", config.test_models))
config.substitutions.append(("%expect-exit", os.path.join(config.test_source_root, "expect-exit.sh")))
config.substitutions.append(("%python", config.python))
