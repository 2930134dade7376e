"""Grouped convolution (groups x B, one op) against B dense convolutions on
channel slices (one per member), forward + backward, for the convolution
shapes of the benchmark models: the measurements behind hfta::conv's choice
of form (runtime/ops/conv_ops.cpp). With them, what the other ways run: B
convolutions on separate tensors (serial and eager training), and one
member's convolution at batch B x N (the dense bound). Prints one CSV line
per shape.

.venv/bin/python bench/conv_forms.py --members 8 --threads 2
"""
import argparse
import time

import torch
import torch.nn.functional as F

# (name, N, C_in, C_out, kernel, stride, spatial, groups, dims)
SHAPES = [
    ("lenet.conv1", 32, 1, 6, 5, 1, 16, 1, 2),
    ("lenet.conv2", 32, 6, 16, 5, 1, 8, 1, 2),
    ("pointnet.conv1", 32, 3, 64, 1, 1, 64, 1, 1),
    ("pointnet.conv2", 32, 64, 128, 1, 1, 64, 1, 1),
    ("pointnet.conv3", 32, 128, 1024, 1, 1, 64, 1, 1),
    ("resnet.conv3x3_64", 8, 64, 64, 3, 1, 32, 1, 2),
    ("resnet.conv3x3_128", 8, 128, 128, 3, 1, 16, 1, 2),
    ("resnet.conv3x3_256", 8, 256, 256, 3, 1, 8, 1, 2),
    ("resnet.conv3x3_512", 8, 512, 512, 3, 1, 4, 1, 2),
    ("resnet.down1x1_512", 8, 256, 512, 1, 2, 8, 1, 2),
    ("mobilenet.pw_144_24", 8, 144, 24, 1, 1, 16, 1, 2),
    ("mobilenet.pw_384_64", 8, 384, 64, 1, 1, 4, 1, 2),
    ("mobilenet.pw_576_96", 8, 576, 96, 1, 1, 4, 1, 2),
    ("mobilenet.pw_960_160", 8, 960, 160, 1, 1, 2, 1, 2),
    ("mobilenet.pw_320_1280", 8, 320, 1280, 1, 1, 2, 1, 2),
    ("mobilenet.dw_144", 8, 144, 144, 3, 1, 16, 144, 2),
    ("mobilenet.dw_576", 8, 576, 576, 3, 1, 4, 576, 2),
    ("dcgan_d.conv1", 8, 3, 64, 4, 2, 64, 1, 2),
    ("dcgan_d.conv2", 8, 64, 128, 4, 2, 32, 1, 2),
    ("dcgan_d.conv3", 8, 128, 256, 4, 2, 16, 1, 2),
    ("dcgan_d.conv4", 8, 256, 512, 4, 2, 8, 1, 2),
]


def timed(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    B = args.members
    print("shape,N,C_in,C_out,k,stride,spatial,groups,grouped_ms,per_member_ms,separate_ms,dense_ms,per_member_speedup")
    for name, n, cin, cout, k, stride, size, groups, dims in SHAPES:
        conv = F.conv2d if dims == 2 else F.conv1d
        spatial = [size] * dims
        x = torch.randn(n, B * cin, *spatial, requires_grad=True)
        w = torch.randn(B * cout, cin // groups, *([k] * dims), requires_grad=True)
        bias = torch.randn(B * cout, requires_grad=True)

        def grouped():
            conv(x, w, bias, stride, k // 2, 1, groups * B).sum().backward()

        def per_member():
            # split, not narrow: split's backward is one cat, narrow's B zero-filled full-size tensors
            outs = [conv(xb, wb, bb, stride, k // 2, 1, groups)
                    for xb, wb, bb in zip(x.split(cin, 1), w.split(cout, 0), bias.split(cout, 0))]
            torch.cat(outs, 1).sum().backward()

        xs = [torch.randn(n, cin, *spatial, requires_grad=True) for _ in range(B)]
        ws = [torch.randn(cout, cin // groups, *([k] * dims), requires_grad=True) for _ in range(B)]

        def separate():  # what serial training runs: B separate contiguous tensors
            for xb, wb in zip(xs, ws):
                conv(xb, wb, None, stride, k // 2, 1, groups).sum().backward()

        x_dense = torch.randn(B * n, cin, *spatial, requires_grad=True)

        def dense():  # one member at batch B x N
            conv(x_dense, ws[0], None, stride, k // 2, 1, groups).sum().backward()

        g, p, s, d = (timed(f, args.reps) for f in (grouped, per_member, separate, dense))
        print(f"{name},{n},{cin},{cout},{k},{stride},{size},{groups},{g:.2f},{p:.2f},{s:.2f},{d:.2f},{g / p:.2f}",
              flush=True)


if __name__ == "__main__":
    main()
