#!/usr/bin/env python3
"""The models of the whole-model comparison (bench/torch_models.py builds them) and issue 10's
zoo run, without importing torch: scripts/gpu_models.sh asks here what `zoo` means.

The zoo is every model of ZOO_MODELS at batch 1 and batch 32. A run of it takes longer than one
call of the GPU machine allows (PyTorch's export and torch.compile take most of it), so it is
split into parts: part K of N holds every N-th model from the K-th on (both batches of a model
in one part, so that one PyTorch process serves them), and bench/models_report.py --merge joins
the parts' tables.

    zoo.py --runs [K/N]    prints the zoo's (or its part's) runs as model:batch,model:batch,...
"""
import argparse
import sys

# The classifiers the project was built against.
CLASSIFIERS = ("resnet50", "vgg16", "mobilenet_v2", "inception_v3")
# The rest of torchvision's classification CNNs (issue 10's zoo): built by name, the same way.
ZOO = ("alexnet", "vgg11_bn", "resnet18", "resnet101", "resnext50_32x4d", "wide_resnet50_2",
       "densenet121", "squeezenet1_1", "googlenet", "mobilenet_v3_small", "mobilenet_v3_large",
       "mnasnet1_0", "shufflenet_v2_x1_0", "efficientnet_b0", "efficientnet_b4",
       "efficientnet_v2_s", "regnet_x_400mf", "regnet_y_400mf", "regnet_y_1_6gf", "convnext_tiny",
       # The other sizes of each family (issue 10: every torchvision classification CNN), where a
       # size changes the layer shapes the kernels see: group widths, depths, channel counts.
       "vgg19_bn", "resnet34", "resnet152", "resnext101_32x8d", "resnext101_64x4d",
       "wide_resnet101_2", "densenet169", "densenet201", "squeezenet1_0", "mnasnet0_5",
       "shufflenet_v2_x2_0", "efficientnet_b7", "efficientnet_v2_m", "regnet_x_3_2gf",
       "regnet_y_3_2gf", "regnet_y_16gf", "convnext_small")
# Segmentation heads: their output dict's "out".
SEGMENTATION = ("fcn_resnet50", "deeplabv3_resnet50", "lraspp_mobilenet_v3_large",
                "fcn_resnet101", "deeplabv3_mobilenet_v3_large")
# Video classifiers (torchvision.models.video) over clips [N, 3, 16, 112, 112]: 3-D convs and
# pools (passes/lower_3d.cc). Built by name like the others; not in the zoo run.
VIDEO = ("r3d_18", "mc3_18", "r2plus1d_18")
# Built only for the predictor's test runs (bench/predictor_split.json, "test"): other widths of
# the zoo's families, so that their layers are unseen by the predictor's fit and held-out sets.
# Not in the zoo run.
PREDICTOR_TEST = ("densenet161", "convnext_base", "regnet_y_800mf", "efficientnet_b2",
                  "shufflenet_v2_x1_5")
MODELS = CLASSIFIERS + ("sr_net",) + ZOO + SEGMENTATION + VIDEO + PREDICTOR_TEST
# Issue 10's zoo run: every torchvision CNN above (the super-resolution net is not torchvision's).
ZOO_MODELS = CLASSIFIERS + ZOO + SEGMENTATION
ZOO_BATCHES = (1, 32)


def zoo_runs(part=1, parts=1):
    """The runs of part `part` (1-based) of `parts`, as [(model, batch)]."""
    if not 1 <= part <= parts:
        raise ValueError("part %d of %d: expected 1 <= K <= N" % (part, parts))
    return [(m, b) for m in ZOO_MODELS[part - 1::parts] for b in ZOO_BATCHES]


def parse_part(text):
    """'K/N' -> (K, N)."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected K/N, e.g. 2/4, not %r" % text)
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError("part %s: expected 1 <= K <= N" % text)
    return k, n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="?", const="1/1", type=parse_part, metavar="K/N",
                    help="print the zoo's runs (part K of N)")
    args = ap.parse_args(argv)
    if args.runs is None:
        ap.error("nothing to do: give --runs [K/N]")
    print(",".join("%s:%d" % r for r in zoo_runs(*args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
