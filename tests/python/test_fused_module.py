"""The fused module in Python: it loads with torch.jit.load (after loading
hfta's runtime library), follows the fused-module contract, trains, switches
between train() and eval(), and split members load with no hfta at all."""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

import torch

warnings.filterwarnings("ignore", message=r".*TorchScript.*")
warnings.filterwarnings("ignore", message=r".*torch\.jit.*")

ARGS = None
MEMBERS = 3


def member_paths(kind):
    return [os.path.join(ARGS.models, f"{kind}_{b}.pt") for b in range(MEMBERS)]


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


class FusedModuleInPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.ops.load_library(ARGS.runtime)
        cls.tmp = tempfile.mkdtemp()
        cls.fused_path = {}
        for kind in ("mlp", "wide", "dropout", "encdec", "stochastic_depth_p25"):
            out = os.path.join(cls.tmp, f"{kind}_fused.pt")
            run(ARGS.fuse, *member_paths(kind), "-o", out)
            cls.fused_path[kind] = out

    def test_parameters_keep_their_names_with_stacked_shapes(self):
        fused = torch.jit.load(self.fused_path["mlp"])
        member = torch.jit.load(member_paths("mlp")[0])
        fused_params = dict(fused.named_parameters())
        self.assertEqual(sorted(fused_params), sorted(dict(member.named_parameters())))
        for name, p in member.named_parameters():
            self.assertEqual(fused_params[name].shape, (MEMBERS,) + tuple(p.shape))
        self.assertEqual(fused.hfta_array_size, MEMBERS)
        self.assertEqual(list(fused.hfta_sources), member_paths("mlp"))

    def test_forward_and_gradients_match_each_member_tuple_outputs_too(self):
        fused = torch.jit.load(self.fused_path["wide"])
        members = [torch.jit.load(p) for p in member_paths("wide")]
        x = torch.randn(MEMBERS, 8, 16)
        logits, score = fused(x)
        (logits.square().mean(dim=(1, 2)).sum() + score.sum()).backward()
        for b, m in enumerate(members):
            want_logits, want_score = m(x[b])
            torch.testing.assert_close(logits[b], want_logits, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(score[b], want_score, atol=1e-5, rtol=1e-5)
            (want_logits.square().mean() + want_score.sum()).backward()
            for name, p in m.named_parameters():
                torch.testing.assert_close(dict(fused.named_parameters())[name].grad[b], p.grad,
                                           atol=1e-5, rtol=1e-5)

    def test_train_and_eval_switch_dropout_per_member(self):
        fused = torch.jit.load(self.fused_path["dropout"])
        x = torch.randn(64, 16)
        xs = x.expand(MEMBERS, 64, 16)
        fused.train()
        y = fused(xs)
        self.assertFalse(torch.allclose(y[0], y[1]), "members must draw their own masks")
        fused.eval()
        self.assertFalse(fused.drop.training)
        member = torch.jit.load(member_paths("dropout")[0]).eval()
        torch.testing.assert_close(fused(xs)[2], member(x), atol=1e-5, rtol=1e-5)

    def test_trains_with_torch_optim_and_split_member_loads_without_hfta(self):
        fused = torch.jit.load(self.fused_path["mlp"])
        opt = torch.optim.SGD(fused.parameters(), lr=0.1)
        x, y = torch.randn(MEMBERS, 8, 4, 4), torch.randn(MEMBERS, 8, 10)
        for _ in range(3):
            opt.zero_grad()
            (fused(x) - y).square().mean(dim=(1, 2)).sum().backward()
            opt.step()
        trained = os.path.join(self.tmp, "trained.pt")
        fused.save(trained)
        member_path = os.path.join(self.tmp, "member1.pt")
        run(ARGS.split, trained, "--index", "1", "-o", member_path)
        # A fresh interpreter that never loads hfta's library.
        check = (
            "import torch, sys\n"
            f"m = torch.jit.load({member_path!r})\n"
            f"x = torch.load({os.path.join(self.tmp, 'x.pt')!r})\n"
            "print(repr(m(x).sum().item()))\n"
        )
        torch.save(x[1], os.path.join(self.tmp, "x.pt"))
        out = subprocess.run([sys.executable, "-c", check], check=True, capture_output=True, text=True)
        expected = fused(x)[1].sum().item()
        self.assertAlmostEqual(float(out.stdout.strip()), expected, places=4)

    def test_rule_families_train_in_python_and_split_back(self):
        """Group and instance norm (running statistics), upsampling and a
        transposed convolution (encdec), and stochastic depth's per-member
        noise (p = 0.25), in float64: the fused module answers as each member
        in eval mode, trains with torch.optim.SGD, and hfta-split gives each
        member back with its trained weights and statistics."""
        torch.manual_seed(0)
        for kind, shape in (("encdec", (3, 20, 20)), ("stochastic_depth_p25", (3, 17, 17))):
            fused = torch.jit.load(self.fused_path[kind])
            members = [torch.jit.load(p).eval() for p in member_paths(kind)]
            x = torch.randn(MEMBERS, 4, *shape, dtype=torch.float64)
            fused.eval()
            with torch.no_grad():
                for b, m in enumerate(members):
                    # float64: a grouped convolution sums in another order
                    # than the member's, ~1e-15 relative; 1e-10 leaves margin.
                    torch.testing.assert_close(fused(x)[b], m(x[b]), atol=1e-10, rtol=1e-10)
            fused.train()
            opt = torch.optim.SGD(fused.parameters(), lr=0.01)
            for _ in range(2):
                opt.zero_grad()
                fused(x).square().flatten(1).mean(dim=1).sum().backward()
                opt.step()
            trained = os.path.join(self.tmp, f"{kind}_trained.pt")
            fused.save(trained)
            fused.eval()
            for b in range(MEMBERS):
                member_path = os.path.join(self.tmp, f"{kind}_member{b}.pt")
                run(ARGS.split, trained, "--index", str(b), "-o", member_path)
                member = torch.jit.load(member_path).eval()
                state = member.state_dict()
                self.assertEqual(sorted(state), sorted(fused.state_dict()))
                for name, t in fused.state_dict().items():
                    torch.testing.assert_close(state[name], t[b], atol=0, rtol=0, msg=f"{kind} {name}")
                with torch.no_grad():
                    torch.testing.assert_close(member(x[b]), fused(x)[b], atol=1e-10, rtol=1e-10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for flag in ("--models", "--runtime", "--fuse", "--split"):
        parser.add_argument(flag, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
