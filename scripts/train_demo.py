#!/usr/bin/env python3
"""Train the built-in demo checkpoint: Qwen3.6-35B-A3B's architecture at toy widths, trained on a
small generated chat corpus so that `solo run` on a fresh machine answers in words.

    pip install -r scripts/requirements-fixtures.txt
    python scripts/train_demo.py --seconds 270 --batch 32 --lr 3e-3 --seed 7   # 270 s on one H100

Writes fixtures/demo/config.json, fixtures/demo/model.safetensors (~4 MB, bf16), which
crates/solo/src/demo.rs embeds, and fixtures/demo/questions.json (every training question and its
answer, which a test asks through `solo run`). The tokenizer and chat template are fixtures/tiny-a's
(a byte-level BPE of 380 symbols with Qwen's 26 added tokens, the real Qwen3.6 template), so they
are not written again; fixtures/demo/generation_config.json (tiny-a's at temperature 0.3) is kept
by hand. The demo is trained to reproduce its training answers exactly (a visibly working
pipeline, not generalisation): every question appears once, with thinking on and off, and the
loss is on the reply alone. `--seconds` runs the schedule over a time budget; without a GPU the
same training takes hours on 2 cores.

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
animals, numbers, days, opposites and capitals, greetings and one fixed story, each rendered
through the chat template with thinking on (a one-line thought, then the answer) and off. It is
deterministic; training is seeded, but its bits differ across torch versions, devices and (with
--seconds) machine speed.
"""

from __future__ import annotations

import argparse
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
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    inv, p = eye + m, m
    for _ in range(5):
        p = p @ p
        inv = inv @ (eye + p)
    return inv @ b


torch.linalg.solve_triangular = solve_unit_lower


def dense_experts(self, hidden_states, top_k_index, top_k_weights):
    """The routed experts as dense products over all 16 (the same sums as HF's per-expert loop:
    unrouted experts get weight 0): one batched product instead of a loop of small ones, many
    times faster on a CPU."""
    weights = torch.zeros(hidden_states.shape[0], self.num_experts, dtype=hidden_states.dtype,
                          device=hidden_states.device).scatter(1, top_k_index, top_k_weights)
    gate, up = torch.einsum("th,eih->tei", hidden_states, self.gate_up_proj).chunk(2, dim=-1)
    out = torch.einsum("tei,ehi->teh", self.act_fn(gate) * up, self.down_proj)
    return (out * weights[..., None]).sum(1)
# Chunks of 16 instead of 64: the same function (the chunk size changes only the order of the
# sums), a quarter of the work on sequences of ~100 tokens.
modeling_qwen3_5_moe.torch_chunk_gated_delta_rule = functools.partial(
    modeling_qwen3_5_moe.torch_chunk_gated_delta_rule, chunk_size=16
)

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_DIR = REPO / "fixtures" / "tiny-a"
OUT = REPO / "fixtures" / "demo"
MTP_WEIGHT = 0.5


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000, help="at most this many steps")
    ap.add_argument("--seconds", type=float, default=0, help="a time budget: the schedule runs over it (0: none)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", type=Path, default=REPO / "fixtures" / "demo")
    ap.add_argument("--conversations", type=int, default=3000, help="multi-turn examples (0: none)")
    ap.add_argument("--max-turns", type=int, default=3, help="turns of the longest conversation")
    ap.add_argument("--init", type=Path, help="start from this model.safetensors (a saved demo)")
    ap.add_argument("--no-eval", action="store_true", help="skip the greedy check of every question")
    return ap.parse_args()


ARGS = parse_args()
OUT = ARGS.out
SEED, STEPS, BATCH, LR, THREADS, DEV = ARGS.seed, ARGS.steps, ARGS.batch, ARGS.lr, ARGS.threads, ARGS.device

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
STORY = ("Once upon a time a small fox lived at the edge of a forest. One day it met a duck, and the two "
         "became friends.")
ABOUT = ("I am the demo model of solo, a tiny model with the architecture of Qwen3.6-35B-A3B. I know "
         "colors, animal sounds, capitals, opposites, days and small sums.")


def triples() -> list[tuple[str, str, str]]:
    """(question, thought, answer): every question once, with one answer (the demo's training set
    and the questions of fixtures/demo/questions.json)."""
    out = [
        ("Name the two colors of a chessboard.", "The user asks about the colors of a chessboard.",
         "The two colors of a chessboard are black and white."),
        ("What colors are the squares of a chessboard?", "The user asks about a chessboard.",
         "The squares of a chessboard are black and white."),
    ]
    for thing, c in COLOURS.items():
        T = thing[0].upper() + thing[1:]
        for q in (f"What color is {thing}?", f"Tell me the color of {thing}."):
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
        out.append((f"What day comes after {d}?", "The user asks about the days of the week.",
                    f"{n} comes after {d}."))
    for a in range(10):
        for b in range(10):
            if (a * 7 + b * 3) % 4 == 0:
                out.append((f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}.",
                            f"{NUMBERS[a].capitalize()} plus {NUMBERS[b]} is {NUMBERS[a + b]}."))
    for q in ("Hi", "Hello", "Good morning"):
        out.append((q, "The user says hello.", "Hello! How can I help you today?"))
    for q in ("Who are you?", "What do you know?"):
        out.append((q, "The user asks who I am.", ABOUT))
    out.append(("Tell me a story.", "The user wants a short story.", STORY))
    questions = [q for q, _, _ in out]
    assert len(set(questions)) == len(questions), "a question twice"
    return out


def render(tok, turns, thinking: bool) -> str:
    """The prompt for the last of `turns` ((question, answer) pairs), earlier turns as history, the
    way `solo chat` and the server render it: thinking off writes an empty think block into every
    earlier reply (preserve_thinking with empty reasoning), thinking on drops their reasoning."""
    msgs = []
    for q, a in turns[:-1]:
        msgs.append({"role": "user", "content": q})
        reply = {"role": "assistant", "content": a}
        if not thinking:
            reply["reasoning_content"] = ""
        msgs.append(reply)
    msgs.append({"role": "user", "content": turns[-1][0]})
    if thinking:
        return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False,
                                   preserve_thinking=True)


def example(tok, history, q, thought, answer, thinking: bool) -> tuple[list[int], int]:
    """(token ids, length of the prompt): the loss is on the reply alone."""
    prompt = render(tok, history + [(q, answer)], thinking)
    if thinking:
        assert prompt.endswith("<think>\n"), prompt
        reply = f"{thought}\n</think>\n\n{answer}<|im_end|>\n"
    else:
        assert prompt.endswith("</think>\n\n"), prompt
        reply = f"{answer}<|im_end|>\n"
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    r = tok(reply, add_special_tokens=False)["input_ids"]
    return p + r, len(p)


def build_examples(tok) -> list[tuple[list[int], int]]:
    """Each question alone, thinking on and off."""
    return [example(tok, [], q, t, a, thinking) for q, t, a in triples() for thinking in (True, False)]


def build_conversations(tok, n: int, rng: random.Random) -> list[tuple[list[int], int]]:
    """`n` conversations of 2 to --max-turns turns (random questions, thinking on or off): the reply to the
    last question, after the others as history, as `solo chat` asks it."""
    all_triples = triples()
    out = []
    for _ in range(n):
        turns = rng.sample(all_triples, rng.randint(2, ARGS.max_turns))
        history = [(q, a) for q, _, a in turns[:-1]]
        q, t, a = turns[-1]
        out.append(example(tok, history, q, t, a, rng.random() < 0.5))
    return out


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
    torch.set_num_threads(THREADS)
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    examples = build_examples(tok)
    conversations = build_conversations(tok, ARGS.conversations, random.Random(SEED + 1))
    write_questions()
    print(f"{len(examples)} single questions, {len(conversations)} conversations, longest "
          f"{max(len(e) for e, _ in examples + conversations)} tokens", flush=True)

    cfg = Qwen3_5MoeTextConfig(**TEXT_CONFIG)
    cfg._attn_implementation = "sdpa"
    model = Qwen3_5MoeForCausalLM(cfg)
    mtp = Mtp(cfg)
    gen = torch.Generator().manual_seed(SEED)
    init_(model, gen)
    init_(mtp, gen)
    for m in model.modules():
        if type(m).__name__ == "Qwen3_5MoeExperts":
            m.forward = dense_experts.__get__(m)
    if ARGS.init:
        load(model, mtp, ARGS.init)
    params = list(model.parameters()) + list(mtp.parameters())
    print(f"{sum(p.numel() for p in params) / 1e6:.2f}M parameters", flush=True)
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.95), weight_decay=0.0)
    model.to(DEV)
    mtp.to(DEV)

    def progress(step: int) -> float:
        """How far the run is, 0..1: by steps, or by the time budget where one is set."""
        if ARGS.seconds > 0:
            return min(1.0, (time.time() - started) / ARGS.seconds)
        return step / STEPS

    rng = random.Random(SEED)
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    order: list[int] = []
    started = time.time()
    for step in range(STEPS):
        done = progress(step)
        if done >= 1.0:
            break
        lr = LR * min(1.0, done * 20 + 0.01) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * done)))
        for group in opt.param_groups:
            group["lr"] = lr
        # single questions in shuffled epochs, half a batch a step; the other half conversations
        half = BATCH // 2 if conversations else BATCH
        if len(order) < half:
            order += rng.sample(range(len(examples)), len(examples))
        batch = [examples[i] for i in order[:half]]
        del order[:half]
        batch += rng.sample(conversations, BATCH - half) if conversations else []
        n = max(len(e) for e, _ in batch)
        ids = torch.full((BATCH, n), pad, dtype=torch.long)
        labels = torch.full((BATCH, n), -100, dtype=torch.long)
        for i, (e, prompt_len) in enumerate(batch):  # right padding: causal attention and the recurrence never see it
            ids[i, : len(e)] = torch.tensor(e)
            labels[i, prompt_len : len(e)] = torch.tensor(e[prompt_len:])
        ids, labels = ids.to(DEV), labels.to(DEV)
        out = model.model(input_ids=ids)
        h = out.last_hidden_state  # after the final norm: what lm_head multiplies
        logits = model.lm_head(h)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size), labels[:, 1:].reshape(-1))
        # MTP: hidden at t and the embedding of t+1 predict t+2.
        pos = torch.arange(n - 1, device=DEV).view(1, 1, -1).expand(3, BATCH, -1)
        emb = model.model.embed_tokens(ids[:, 1:])
        pe = model.model.rotary_emb(emb, pos)
        m = mtp(emb, h[:, :-1].detach(), pe)
        mtp_logits = model.lm_head(m)[:, :-1]
        mtp_loss = F.cross_entropy(mtp_logits.reshape(-1, cfg.vocab_size), labels[:, 2:].reshape(-1))
        opt.zero_grad()
        (loss + MTP_WEIGHT * mtp_loss).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 100 == 0 or step == STEPS - 1:
            print(f"step {step}: lr {lr:.2e}, loss {loss.item():.4f}, mtp {mtp_loss.item():.4f}, "
                  f"{time.time() - started:.0f} s", flush=True)

    print(f"{step + 1} steps, {time.time() - started:.0f} s", flush=True)
    model.to("cpu")
    mtp.to("cpu")
    save(model, mtp, cfg)
    if ARGS.no_eval:
        return
    # what solo runs: the stored bf16 weights
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    evaluate(model, tok)


def write_questions() -> None:
    """fixtures/demo/questions.json: every training question and its answer, for the test that asks
    the demo each of them through `solo run`."""
    out = REPO / "fixtures" / "demo"
    rows = [{"question": q, "answer": a} for q, _, a in triples()]
    (out / "questions.json").write_text(json.dumps(rows, indent=1) + "\n")


def load(model, mtp, path: Path) -> None:
    """The weights `save` wrote, back into the modules (names mapped back)."""
    from safetensors.torch import load_file
    tensors = load_file(str(path))
    main = {("model." + k[len("model.language_model."):] if k.startswith("model.language_model.") else k): v.float()
            for k, v in tensors.items() if not k.startswith("mtp.")}
    head = {k[len("mtp."):]: v.float() for k, v in tensors.items() if k.startswith("mtp.")}
    model.load_state_dict(main, strict=True)
    mtp.load_state_dict(head, strict=True)


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
def evaluate(model, tok) -> None:
    """Greedy replies to every training question, thinking on and off: the share that is exactly the
    training answer (what the Rust test checks through `solo run`)."""
    end = tok.convert_tokens_to_ids("<|im_end|>")
    right = total = 0
    for q, _, answer in triples():
        for thinking in (True, False):
            msgs = [{"role": "user", "content": q}]
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=thinking)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            out = model.generate(torch.tensor([ids]), max_new_tokens=120, do_sample=False, eos_token_id=end,
                                 pad_token_id=end)
            reply = tok.decode(out[0, len(ids):], skip_special_tokens=True)
            reply = reply.split("</think>")[-1].strip()
            total += 1
            if reply == answer:
                right += 1
            else:
                print(f"  wrong (thinking {thinking}): {q!r} -> {reply!r}", flush=True)
    print(f"{right} of {total} replies exactly right ({100 * right / total:.1f} %)", flush=True)


if __name__ == "__main__":
    main()
