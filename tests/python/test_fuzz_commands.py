"""Damaged inputs through the commands themselves: each run must exit 0, or
exit 2 with an `error:` message, never crash, hang or say "internal error"
(exit 1). The in-process fuzzer (tests/fuzz/fuzz_inputs.cpp) runs thousands
of cases through what the commands run; this runs a few dozen through the
binaries, for what only they do (argument handling, exit codes, messages).

python tests/python/test_fuzz_commands.py --fuse BUILD/tools/hfta-fuse --split BUILD/tools/hfta-split \
    --opt BUILD/tools/hfta-opt --models BUILD/test_models --corpus lit/fuse.test
"""
import argparse
import os
import random
import subprocess
import tempfile

CASES = 36
SECONDS = 60  # one run; far above what a clean exit takes


def damaged_archive(data, rng):
    data = bytearray(data)
    if rng.random() < 0.5:
        return bytes(data[:rng.randrange(len(data))]), "truncated"
    for _ in range(rng.randint(1, 16)):
        data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    return bytes(data), "bytes flipped"


def damaged_ir(text, rng):
    lines = text.splitlines()
    i = rng.randrange(len(lines))
    choice = rng.randrange(3)
    if choice == 0:
        del lines[i]
        return "\n".join(lines) + "\n", f"line {i + 1} removed"
    if choice == 1:
        lines.insert(rng.randrange(len(lines)), lines[i])
        return "\n".join(lines) + "\n", f"line {i + 1} duplicated"
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        chars[rng.randrange(len(chars))] = rng.choice("%():,=[]0123456789abcx_. ")
    return "".join(chars), "characters changed"


def ir_sections(path):
    sections, name = {}, None
    for line in open(path):
        if line.startswith("//--- "):
            name = line[6:].strip()
            sections[name] = ""
        elif name:
            sections[name] += line
    return {k: v for k, v in sections.items() if k.endswith(".ir")}


def check(command, what):
    result = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=SECONDS)
    assert result.returncode in (0, 2), f"{what}: exit {result.returncode}\n{result.stderr[-2000:]}"
    assert "internal error" not in result.stderr, f"{what}: {result.stderr[-2000:]}"
    if result.returncode == 2:
        assert ": error: " in result.stderr, f"{what}: exit 2 without a message: {result.stderr!r}"
    return result.returncode


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--fuse", "--split", "--opt", "--models", "--corpus"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    rng = random.Random(7)
    seeds = [os.path.join(args.models, f) for f in ("mlp_0.pt", "lenet_0.pt", "zoo_0.pt")]
    sections = ir_sections(args.corpus)
    exits = {0: 0, 2: 0}
    with tempfile.TemporaryDirectory() as tmp:
        fused = os.path.join(tmp, "fused.pt")
        subprocess.run([args.fuse, seeds[0], os.path.join(args.models, "mlp_1.pt"), "-o", fused], check=True,
                       capture_output=True)
        case = os.path.join(tmp, "case.pt")
        for c in range(CASES):
            kind = c % 3
            if kind == 0:  # a damaged member for hfta-fuse
                seed = rng.choice(seeds)
                data, how = damaged_archive(open(seed, "rb").read(), rng)
                open(case, "wb").write(data)
                exits[check([args.fuse, seed, case, "-o", os.path.join(tmp, "out.pt")], f"hfta-fuse: {how}")] += 1
            elif kind == 1:  # a damaged fused module for hfta-split
                data, how = damaged_archive(open(fused, "rb").read(), rng)
                open(case, "wb").write(data)
                exits[check([args.split, case, "--index", "1", "-o", os.path.join(tmp, "member.pt")],
                            f"hfta-split: {how}")] += 1
            else:  # damaged IR for hfta-opt
                name = rng.choice(sorted(sections))
                text, how = damaged_ir(sections[name], rng)
                ir = os.path.join(tmp, "case.ir")
                open(ir, "w").write(text)
                exits[check([args.opt, ir, "-B", "2", "--pass", "verify-lockstep", "--pass", "fuse"],
                            f"hfta-opt: {name}: {how}")] += 1
    print(f"test_fuzz_commands: {CASES} damaged inputs: {exits[0]} ran, {exits[2]} refused with a message; OK")


if __name__ == "__main__":
    main()
