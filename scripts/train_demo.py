#!/usr/bin/env python3
"""Train the built-in demo checkpoint: Qwen3.6-35B-A3B's architecture at toy widths, trained on a
small generated chat corpus so that `solo run` on a fresh machine answers in words.

    pip install -r scripts/requirements-fixtures.txt
    python scripts/train_demo.py [STEPS]    # 240 steps: 38 minutes on a busy 2-core machine

Writes fixtures/demo/config.json and fixtures/demo/model.safetensors (~4 MB, bf16), which
crates/solo/src/demo.rs embeds; the tokenizer and chat template are fixtures/tiny-a's (a
byte-level BPE of 380 symbols with Qwen's 26 added tokens, the real Qwen3.6 template), so they are
not written again; fixtures/demo/generation_config.json (tiny-a's at temperature 0.3) is kept by hand.

The model: 4 layers (3 Gated DeltaNet, 1 gated full attention), hidden 128, 16 routed experts
(top 4) plus the shared expert, vocabulary 512 (ids 406.. unused), and an MTP head (`mtp.*`: the
release's names and shapes, trained). The MTP head follows the release's layout: for position t it
normalises the embedding of token t+1 (`pre_fc_norm_embedding`) and the main model's final hidden
state at t (after the final norm, `pre_fc_norm_hidden`), concatenates them (embedding first), maps
2·hidden → hidden (`fc`), runs one full-attention decoder layer (`mtp.layers.0`), normalises
(`mtp.norm`) and predicts token t+2 through the shared lm_head. Its loss does not reach the main
model (the hidden states are detached), so the main model is what plain next-token training gives.
Which hidden state the release's head takes (after the final norm, as vLLM's Qwen3-Next MTP passes
it, or before) is this script's assumption, not checked against the release: an MTP implementation
that reads it the other way should retrain with that choice.

The corpus is generated here (public domain by construction): short questions about colours,
animals, numbers, days, opposites and capitals, greetings and a few fixed stories, each rendered
through the chat template with thinking on (a one-line thought, then the answer) and off. It is
deterministic; training is seeded, but its bits may differ across torch versions and thread counts.
"""

from __future__ import annotations

import functools
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import AutoTokenizer
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
    Qwen3_5MoeDecoderLayer,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeRMSNorm,
)



def solve_unit_lower(a, b, *, upper, unitriangular):
    """torch.linalg.solve_triangular for what HF's reference chunked delta rule asks (unit lower
    triangular 64 x 64 systems), without its CPU path, which takes seconds a batch: with
    a = I + N (N strictly lower, so N^64 = 0), a^-1 = (I - N)(I + N^2)(I + N^4)...(I + N^32)."""
    assert not upper and unitriangular
    m = -a.tril(-1)
    eye = torch.eye(a.shape[-1], dtype=a.dtype)
    inv, p = eye + m, m
    for _ in range(5):
        p = p @ p
        inv = inv @ (eye + p)
    return inv @ b


torch.linalg.solve_triangular = solve_unit_lower
# Chunks of 16 instead of 64: the same function (the chunk size changes only the order of the
# sums), a quarter of the work on sequences of ~100 tokens.
modeling_qwen3_5_moe.torch_chunk_gated_delta_rule = functools.partial(
    modeling_qwen3_5_moe.torch_chunk_gated_delta_rule, chunk_size=16
)

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_DIR = REPO / "fixtures" / "tiny-a"
OUT = REPO / "fixtures" / "demo"
SEED = 7
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 240
BATCH = 12
MTP_WEIGHT = 0.5

TEXT_CONFIG = dict(
    model_type="qwen3_5_moe_text",
    hidden_size=128,
    num_hidden_layers=4,
    full_attention_interval=4,
    vocab_size=512,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    max_position_embeddings=32768,
    attn_output_gate=True,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    rope_parameters={"rope_type": "default", "rope_theta": 1.0e7, "partial_rotary_factor": 0.25},
    linear_num_key_heads=4,
    linear_num_value_heads=8,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
    linear_conv_kernel_dim=4,
    num_experts=16,
    num_experts_per_tok=4,
    moe_intermediate_size=32,
    shared_expert_intermediate_size=64,
    mtp_num_hidden_layers=1,
    mtp_use_dedicated_embeddings=False,
    hidden_act="silu",
)

# ---------------------------------------------------------------------------------------------
# The corpus: (question, thought, answer) triples
# ---------------------------------------------------------------------------------------------

COLOURS = {
    "the sky": "blue", "grass": "green", "snow": "white", "coal": "black", "a banana": "yellow",
    "a tomato": "red", "an orange": "orange", "a lemon": "yellow", "the sea": "blue", "milk": "white",
    "a leaf": "green", "blood": "red", "the night": "black", "a carrot": "orange", "a plum": "purple",
}
SOUNDS = {"a cow": "moo", "a dog": "woof", "a cat": "meow", "a duck": "quack", "a sheep": "baa",
          "a pig": "oink", "a horse": "neigh", "an owl": "hoot", "a frog": "ribbit", "a lion": "roar"}
CAPITALS = {"France": "Paris", "Italy": "Rome", "Spain": "Madrid", "Germany": "Berlin", "Japan": "Tokyo",
            "Egypt": "Cairo", "Peru": "Lima", "Norway": "Oslo", "Greece": "Athens", "Kenya": "Nairobi",
            "Canada": "Ottawa", "Chile": "Santiago"}
OPPOSITES = {"hot": "cold", "big": "small", "up": "down", "fast": "slow", "day": "night", "old": "new",
             "light": "dark", "open": "closed", "happy": "sad", "early": "late", "wet": "dry", "full": "empty"}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
           "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen"]
STORIES = [
    "Once upon a time a small fox lived at the edge of a forest. Every morning it ran to the river to "
    "drink. One day it met a duck, and the two became friends. They played in the sun until the night came.",
    "A little girl found a seed in the garden. She put it in the ground and gave it water every day. "
    "The seed grew into a tall tree, and in the summer the tree gave her shade and sweet red apples.",
    "An old man had a slow horse. The people in the town laughed at it. But when the snow came, the fast "
    "horses stayed home, and the slow horse carried the bread to every house in the town.",
]
ABOUT = ("I am the demo model of solo: a tiny model with the architecture of Qwen3.6-35B-A3B, trained "
         "in a few minutes on a CPU. I know a little about colors, animals, numbers, days and capitals.")


def triples() -> list[tuple[str, str, str]]:
    out = []
    for _ in range(6):  # the demo's own prompt, weighted up
        out.append(("Name the two colors of a chessboard.", "The user asks about the colors of a chessboard.",
                    "The two colors of a chessboard are black and white."))
    out.append(("What colors are the squares of a chessboard?", "The user asks about a chessboard.",
                "The squares of a chessboard are black and white."))
    for thing, c in COLOURS.items():
        T = thing[0].upper() + thing[1:]
        for q in (f"What color is {thing}?", f"Tell me the color of {thing}.", f"Which color is {thing}?"):
            out.append((q, f"The user asks about the color of {thing}.", f"{T} is {c}."))
    for animal, s in SOUNDS.items():
        A = animal[0].upper() + animal[1:]
        for q in (f"What does {animal} say?", f"What sound does {animal} make?"):
            out.append((q, f"The user asks about {animal}.", f"{A} says {s}."))
    for country, city in CAPITALS.items():
        for q in (f"What is the capital of {country}?", f"Name the capital of {country}."):
            out.append((q, f"The user asks about {country}.", f"The capital of {country} is {city}."))
    for a, b in OPPOSITES.items():
        out.append((f"What is the opposite of {a}?", f"The user asks for the opposite of {a}.",
                    f"The opposite of {a} is {b}."))
        out.append((f"What is the opposite of {b}?", f"The user asks for the opposite of {b}.",
                    f"The opposite of {b} is {a}."))
    for i, d in enumerate(DAYS):
        n = DAYS[(i + 1) % 7]
        out.append((f"What day comes after {d}?", f"The user asks about the days of the week.",
                    f"{n} comes after {d}."))
    for a in range(10):
        for b in range(10):
            if (a * 7 + b * 3) % 4 == 0:
                out.append((f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}.",
                            f"{NUMBERS[a].capitalize()} plus {NUMBERS[b]} is {NUMBERS[a + b]}: {a} + {b} = {a + b}."))
    for q in ("Hi", "Hello", "Hello!", "Hi there", "Good morning"):
        out.append((q, "The user says hello.", "Hello! How can I help you today?"))
    for q in ("Who are you?", "What are you?", "Tell me about yourself."):
        out.append((q, "The user asks who I am.", ABOUT))
    for q in ("Tell me a story.", "Tell me a short story.", "Write a story."):
        for s in STORIES:
            out.append((q, "The user wants a short story.", s))
    return out


def build_examples(tok) -> list[list[int]]:
    examples = []
    for q, thought, answer in triples():
        msgs = [{"role": "user", "content": q}]
        think = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        plain = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
        assert think.endswith("<think>\n") and plain.endswith("</think>\n\n"), (think, plain)
        for text in (f"{think}{thought}\n</think>\n\n{answer}<|im_end|>\n", f"{plain}{answer}<|im_end|>\n"):
            examples.append(tok(text, add_special_tokens=False)["input_ids"])
    return examples


# ---------------------------------------------------------------------------------------------
# The MTP head (the release's mtp.* tensors)
# ---------------------------------------------------------------------------------------------


class Mtp(torch.nn.Module):
    def __init__(self, cfg: Qwen3_5MoeTextConfig):
        super().__init__()
        H = cfg.hidden_size
        self.pre_fc_norm_embedding = Qwen3_5MoeRMSNorm(H, eps=cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = Qwen3_5MoeRMSNorm(H, eps=cfg.rms_norm_eps)
        self.fc = torch.nn.Linear(2 * H, H, bias=False)
        full = cfg.layer_types.index("full_attention")
        self.layers = torch.nn.ModuleList([Qwen3_5MoeDecoderLayer(cfg, full)])
        self.norm = Qwen3_5MoeRMSNorm(H, eps=cfg.rms_norm_eps)

    def forward(self, next_embeds, hidden, position_embeddings):
        x = torch.cat([self.pre_fc_norm_embedding(next_embeds), self.pre_fc_norm_hidden(hidden)], dim=-1)
        x = self.fc(x)
        x = self.layers[0](x, position_embeddings=position_embeddings, attention_mask=None)
        return self.norm(x)


def init_(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Scaled-normal matrices, zero-centred norms at 0, the GDN decays spread over the heads."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.linspace(math.log(0.5), math.log(8.0), p.numel()))
            elif name.endswith("dt_bias"):
                p.fill_(1.0)
            elif name.endswith("linear_attn.norm.weight"):
                p.fill_(1.0)
            elif p.ndim == 1:
                p.zero_()
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))


def main() -> None:
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    examples = build_examples(tok)
    print(f"{len(examples)} examples, longest {max(map(len, examples))} tokens", flush=True)

    cfg = Qwen3_5MoeTextConfig(**TEXT_CONFIG)
    cfg._attn_implementation = "sdpa"
    model = Qwen3_5MoeForCausalLM(cfg)
    mtp = Mtp(cfg)
    gen = torch.Generator().manual_seed(SEED)
    init_(model, gen)
    init_(mtp, gen)
    params = list(model.parameters()) + list(mtp.parameters())
    print(f"{sum(p.numel() for p in params) / 1e6:.2f}M parameters", flush=True)
    opt = torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * min(s, STEPS) / STEPS))
    )
    rng = random.Random(SEED)
    by_length = sorted(examples, key=len)
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    started = time.time()
    for step in range(STEPS):
        # examples of similar length together (little padding): a random one and its neighbours
        start = rng.randrange(len(by_length) - BATCH + 1)
        batch = by_length[start : start + BATCH]
        n = max(map(len, batch))
        ids = torch.full((BATCH, n), pad, dtype=torch.long)
        labels = torch.full((BATCH, n), -100, dtype=torch.long)
        for i, e in enumerate(batch):  # right padding: causal attention and the recurrence never see it
            ids[i, : len(e)] = torch.tensor(e)
            labels[i, : len(e)] = torch.tensor(e)
        out = model.model(input_ids=ids)
        h = out.last_hidden_state  # after the final norm: what lm_head multiplies
        logits = model.lm_head(h)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size), labels[:, 1:].reshape(-1))
        # MTP: hidden at t and the embedding of t+1 predict t+2.
        pos = torch.arange(n - 1).view(1, 1, -1).expand(3, BATCH, -1)
        emb = model.model.embed_tokens(ids[:, 1:])
        pe = model.model.rotary_emb(emb, pos)
        m = mtp(emb, h[:, :-1].detach(), pe)
        mtp_logits = model.lm_head(m)[:, :-1]
        mtp_loss = F.cross_entropy(mtp_logits.reshape(-1, cfg.vocab_size), labels[:, 2:].reshape(-1))
        opt.zero_grad()
        (loss + MTP_WEIGHT * mtp_loss).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == STEPS - 1:
            print(f"step {step}: loss {loss.item():.3f}, mtp {mtp_loss.item():.3f}, "
                  f"{time.time() - started:.0f} s", flush=True)

    save(model, mtp, cfg)
    sample(model, tok)


def save(model, mtp, cfg) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for k, v in model.state_dict().items():
        name = "model.language_model." + k[len("model."):] if k.startswith("model.") else k
        tensors[name] = v.detach().to(torch.bfloat16).contiguous()
    for k, v in mtp.state_dict().items():
        tensors["mtp." + k] = v.detach().to(torch.bfloat16).contiguous()
    # A_log is stored F32, as in the release.
    for k in tensors:
        if k.endswith("A_log"):
            tensors[k] = tensors[k].to(torch.float32)
    save_file(tensors, str(OUT / "model.safetensors"), metadata={"format": "pt"})
    text = {k: v for k, v in TEXT_CONFIG.items() if k not in ("hidden_act",)}
    config = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": text,
    }
    (OUT / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    size = (OUT / "model.safetensors").stat().st_size
    print(f"wrote {OUT}/model.safetensors ({size / 1e6:.1f} MB) and config.json", flush=True)


@torch.no_grad()
def sample(model, tok) -> None:
    """Greedy replies to two prompts, as a check that the model answers in words."""
    for q in ("Name the two colors of a chessboard.", "What does a cow say?"):
        msgs = [{"role": "user", "content": q}]
        ids = tok(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True),
                  add_special_tokens=False)["input_ids"]
        end = tok.convert_tokens_to_ids("<|im_end|>")
        for _ in range(80):
            nxt = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            if nxt == end:
                break
            ids.append(nxt)
        print(repr(tok.decode(ids)), flush=True)


if __name__ == "__main__":
    main()
