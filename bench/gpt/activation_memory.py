"""The activation memory of the GPT model's blocks, as docs/parallel.md derives it."""


def activation_formula(s, b, h, a, t, sp):
    """Bytes torch holds for backward per GPT block, fp32, no dropout (docs/parallel.md).

    Elements per block: its output and the second LayerNorm's input (sbh each; s/t under
    SP), the inputs of QKV and fc1 (sbh each, the gathered ones under SP), q, k and v copies
    for the batched products (3sbh/t), the attention output (sbh/t), the softmax output
    (a/t·b·s²), fc1's output and GELU's (4sbh/t each), the two LayerNorms' means and inverse
    deviations (4sb, or 4sb/t under SP); plus the causal mask, s² bools.
    """
    sbh = s * b * h
    if sp:
        elements = 2 * sbh + 14 * sbh // t + (a // t) * b * s * s + 4 * s * b // t
    else:
        elements = 4 * sbh + 12 * sbh // t + (a // t) * b * s * s + 4 * s * b
    return 4 * elements + s * s
