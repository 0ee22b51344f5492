"""Real models train 10 steps on CSX with the same losses, parameters, buffers and
optimizer state as the same script on the CPU backend (eager torch).

Models: Hugging Face GPT2LMHeadModel and BertForSequenceClassification (small configs,
random weights, no downloads, dropout off so both backends draw no random numbers), a
ResNet-style CNN, a two-layer nn.LSTM tagger, nn.MultiheadAttention with a causal mask
followed by F.scaled_dot_product_attention, nn.Embedding with padding_idx, nn.GroupNorm.

Tolerance: 1e-5 relative to each tensor's largest value, with an absolute floor of 1e-6
for tensors that stay near zero. The floor is for parameters whose true gradient is
exactly zero, such as BERT's attention key bias: adding a constant to every key leaves the
softmax unchanged, so that bias starts at zero and receives only float32 rounding noise,
which differs between any two implementations. SGD with momentum is the optimizer: Adam
would divide that noise by its own square root and turn it into full-size updates.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from train_script import assert_close_rel, train

transformers = pytest.importorskip("transformers", reason="the real-model tests need transformers (dev extra)")
transformers.logging.set_verbosity_error()

STEPS = 10
REL, ATOL = 1e-5, 1e-6


def _tokens(vocab, shape, n=STEPS, labels=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(1, vocab, shape, generator=g)
        x[:, -2:] = 0  # trailing padding tokens (id 0)
        y = torch.randint(0, labels, (shape[0],), generator=g) if labels else (x * 3 + 1) % vocab
        out.append((x, y))
    return out


# ---- models ---------------------------------------------------------------------------


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    model = transformers.GPT2LMHeadModel(cfg)
    return model, _tokens(64, (2, 16)), lambda m, x, y: m(input_ids=x, labels=x).loss


def bert():
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, num_labels=3)
    model = transformers.BertForSequenceClassification(cfg)

    def loss_fn(m, x, y):
        return m(input_ids=x, attention_mask=(x != 0).long(), labels=y).loss

    return model, _tokens(64, (2, 16), labels=3), loss_fn


class BasicBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus a (projected when the shape changes) shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2))
        self.layers = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))


def resnet():
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 10, (4,), generator=g))
               for _ in range(STEPS)]
    return ResNet(), batches, None


class LSTMTagger(nn.Module):
    def __init__(self, vocab=32, d=8, hidden=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.head(self.lstm(self.emb(x))[0])


def _token_loss(m, x, y):
    return F.cross_entropy(m(x).flatten(0, 1), y.flatten())


def lstm():
    return LSTMTagger(), _tokens(32, (2, 6)), _token_loss


class Attention(nn.Module):
    """nn.MultiheadAttention under a causal mask, then causal F.scaled_dot_product_attention."""

    def __init__(self, vocab=32, d=16, heads=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mha = nn.MultiheadAttention(d, heads, batch_first=True)
        self.qkv = nn.Linear(d, 3 * d)
        self.heads = heads
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        h = self.emb(x)
        T = x.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        h = h + self.mha(h, h, h, attn_mask=causal, need_weights=False)[0]
        B, _, D = h.shape
        q, k, v = self.qkv(h).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(h + a.transpose(1, 2).reshape(B, T, D))


def attention():
    return Attention(), _tokens(32, (2, 8)), _token_loss


class PaddedBagOfWords(nn.Module):
    """Mean of token embeddings over non-padding positions; padding_idx rows get no gradient."""

    def __init__(self, vocab=32, d=8, classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.fc = nn.Linear(d, classes)

    def forward(self, x):
        mask = (x != 0).unsqueeze(-1).float()
        return self.fc((self.emb(x) * mask).sum(1) / mask.sum(1).clamp_min(1))


def embedding_padding():
    return PaddedBagOfWords(), _tokens(32, (4, 6), labels=4), None


class GroupNormNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.gn1 = nn.GroupNorm(4, 8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.gn2 = nn.GroupNorm(2, 8, affine=False)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        h = F.silu(self.gn1(self.conv1(x)))
        h = F.silu(self.gn2(self.conv2(h)))
        return self.fc(h.mean((2, 3)))


def group_norm():
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g)) for _ in range(STEPS)]
    return GroupNormNet(), batches, None


MODELS = {
    "gpt2": gpt2, "bert": bert, "resnet": resnet, "lstm": lstm, "attention": attention,
    "embedding_padding_idx": embedding_padding, "group_norm": group_norm,
}
SLOW = {"gpt2", "bert", "lstm"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in MODELS])
def test_real_model_trains_on_csx_like_cpu(name):
    torch.manual_seed(0)
    model, batches, loss_fn = MODELS[name]()
    cpu_losses, cpu_model, cpu_opt, _ = train("CPU", model, batches, "sgd", loss_fn)
    csx_losses, csx_model, csx_opt, _ = train("CSX", model, batches, "sgd", loss_fn)

    assert len(csx_losses) == STEPS
    assert_close_rel(torch.tensor(csx_losses), torch.tensor(cpu_losses), REL, "losses")
    assert csx_model.keys() == cpu_model.keys()
    for k in cpu_model:
        assert_close_rel(csx_model[k], cpu_model[k], REL, f"model {k}", atol=ATOL)
    for i, st in cpu_opt["state"].items():
        for k, v in st.items():
            assert_close_rel(csx_opt["state"][i][k], v, REL, f"optimizer state {i}.{k}", atol=ATOL)
    initial = model.state_dict()
    moved = [k for k in cpu_model if cpu_model[k].is_floating_point() and not torch.equal(cpu_model[k], initial[k])]
    assert len(moved) >= len([p for p in model.parameters()]) // 2, "training should move the parameters"
