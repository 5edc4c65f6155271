"""Check a built wheel: entry points declared, and no vLLM or torch pin."""

import configparser
import sys
import zipfile


def main(path: str) -> int:
    with zipfile.ZipFile(path) as whl:
        names = whl.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        parser = configparser.ConfigParser()
        parser.read_string(whl.read(entry_points).decode())
        requires = [
            line.split(":", 1)[1].strip()
            for line in whl.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    problems = []
    if parser.get("vllm.general_plugins", "dspark_attn_plugin", fallback=None) != (
        "dspark_attn_plugin:register"
    ):
        problems.append("no vllm.general_plugins entry point dspark_attn_plugin:register")
    if parser.get("console_scripts", "dspark-attn-plugin", fallback=None) != (
        "dspark_attn_plugin.cli:main"
    ):
        problems.append("no dspark-attn-plugin console script")
    pinned = [r for r in requires if "extra ==" not in r and r.split()[0].lower() in ("vllm", "torch")]
    if pinned:
        problems.append(f"install requirements must not name vLLM or torch: {pinned}")
    if not any(n.startswith("dspark_attn_plugin/") and n.endswith("__init__.py") for n in names):
        problems.append("package dspark_attn_plugin missing")
    for problem in problems:
        print(f"{path}: {problem}", file=sys.stderr)
    if not problems:
        print(f"{path}: entry point and requirements OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(max(main(p) for p in sys.argv[1:]))
