"""The activation memory of the GPT model's blocks, as docs/parallel.md derives it."""


def activation_formula(s, b, h, a, t, sp, u=1):
    """Bytes torch holds for backward per GPT block, fp32, no dropout (docs/parallel.md).

    A rank holds r = s/u tokens outside attention (Ulysses cp degree u). Elements per block:
    its output and the second LayerNorm's input (rbh each; r/t under SP), the inputs of QKV
    and fc1 (rbh each; under SP their r/t rows, which backward gathers again), q, k and v
    copies for the batched products (3rbh/t), the attention output (rbh/t), the softmax output
    (a/(tu)·b·s²: every query of the sequence for the rank's heads), fc1's output and GELU's (4rbh/t each), the two
    LayerNorms' means and inverse deviations (4rb, or 4rb/t under SP); plus the causal mask,
    s² bools.
    """
    r = s // u
    rbh = r * b * h
    attention = (a // (t * u)) * b * s * s
    if sp:
        elements = 16 * rbh // t + attention + 4 * r * b // t
    else:
        elements = 4 * rbh + 12 * rbh // t + attention + 4 * r * b
    return 4 * elements + s * s
