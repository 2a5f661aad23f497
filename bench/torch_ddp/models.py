"""The benchmark's three models and their data (bench/torch_ddp/ddp_bench.py).

Every backend (chorus, gloo, nosync) builds the same model from the same seed and trains rank r
on the same batches, so the three runs of a cell differ only in how gradients are synchronised.
The MLP keeps the per-rank batch of 64 that the reference measurements of gloo DDP used (about
20 ms a step on one core of the reference machine: 2-core AMD EPYC, OpenBLAS, one torch thread),
so its communication share is comparable to theirs; the language models' batches and contexts
make a step take about 110 ms (transformer) and 220 ms (lstm).

- mlp: 1024-1024-1024-1024-10 (4 Linear layers, ReLU), random Gaussian inputs, 10 classes.
- transformer: causal character LM, 2 encoder layers, d_model 256, 4 heads, feed-forward 1024,
  context 64, learned positions, byte vocabulary (128).
- lstm: character LM, embedding 128, 2-layer LSTM with hidden 512, context 32, same vocabulary
  (an LSTM step is sequential in time, so its cost grows with the context far more than a
  transformer's does on one core).

The language models read windows of the text in CORPUS (the GPL-3 text Debian ships in
base-files, 35 kB of ASCII). If that file is missing they fall back to uniformly random tokens
of the same vocabulary and the report says so (the step time does not depend on the tokens).
"""

import os

import torch
import torch.nn as nn

SEED = 1
VOCAB = 128
CONTEXT = 64  # the transformer's; models with a shorter context use a prefix of its positions
CORPUS = "/usr/share/common-licenses/GPL-3"

# name -> (per-rank batch, context (tokens per sample; None: not a language model), description)
MODELS = {
    "mlp": (64, None, "MLP 1024-1024x3-10 (4 Linear + ReLU)"),
    "transformer": (8, CONTEXT, "causal LM, 2 encoder layers, d_model 256, 4 heads, ff 1024, learned positions"),
    "lstm": (8, 32, "LM, embedding 128, 2-layer LSTM hidden 512"),
}


class MLP(nn.Sequential):
    def __init__(self, width=1024, layers=4, classes=10):
        modules = []
        for _ in range(layers - 1):
            modules += [nn.Linear(width, width), nn.ReLU()]
        modules.append(nn.Linear(width, classes))
        super().__init__(*modules)


class TransformerLM(nn.Module):
    """Token + position embeddings, a causal TransformerEncoder, a vocabulary head."""

    def __init__(self, d_model=256, heads=4, layers=2, ff=1024):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, d_model)
        self.positions = nn.Embedding(CONTEXT, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, VOCAB)
        # A plain attribute, not a buffer: DDP would broadcast a buffer before every forward.
        self.causal = torch.triu(torch.full((CONTEXT, CONTEXT), float("-inf")), diagonal=1)

    def forward(self, tokens):
        n = tokens.shape[1]
        h = self.tokens(tokens) + self.positions(torch.arange(n))
        return self.head(self.body(h, mask=self.causal[:n, :n]))


class LSTMLM(nn.Module):
    def __init__(self, embed=128, hidden=512, layers=2):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, VOCAB)

    def forward(self, tokens):
        return self.head(self.lstm(self.tokens(tokens))[0])


def build(name):
    """The model `name` with parameters drawn from SEED (identical on every rank and backend)."""
    torch.manual_seed(SEED)
    return {"mlp": MLP, "transformer": TransformerLM, "lstm": LSTMLM}[name]()


def corpus():
    """(tokens, source): the corpus as a 1-D int64 tensor of bytes < VOCAB, or None if absent."""
    if not os.path.exists(CORPUS):
        return None, "random tokens (corpus {} not found)".format(CORPUS)
    with open(CORPUS, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    return data.clamp(max=VOCAB - 1), "characters of {}".format(CORPUS)


def batches(name, rank, count):
    """`count` (input, target) pairs of rank `rank`'s share; same for every backend.

    Targets are flat class indices: for the language models the next character of every
    position, matching the (batch * context, VOCAB) logits that `logits()` returns.
    """
    per_rank, context = MODELS[name][:2]
    gen = torch.Generator().manual_seed(SEED * 1000 + rank)
    if name == "mlp":
        return [(torch.randn(per_rank, 1024, generator=gen), torch.randint(0, 10, (per_rank,), generator=gen))
                for _ in range(count)]
    text, _ = corpus()
    out = []
    for _ in range(count):
        if text is None:
            window = torch.randint(0, VOCAB, (per_rank, context + 1), generator=gen)
        else:
            starts = torch.randint(0, len(text) - context - 1, (per_rank,), generator=gen)
            window = torch.stack([text[s:s + context + 1] for s in starts.tolist()])
        out.append((window[:, :-1].contiguous(), window[:, 1:].reshape(-1)))
    return out


def logits(model, x):
    """The model's output as (samples, classes) for cross-entropy against `batches()` targets."""
    out = model(x)
    return out.reshape(-1, out.shape[-1])


def data_source(name):
    return "random Gaussian inputs" if name == "mlp" else corpus()[1]


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())
