"""The lesson 09 checker accepts every correct greedy_decode and names each usual mistake.

Each wrong answer below is one a learner really writes; each test asserts the checker
returns False *and* prints, on its one verdict line, the case and the diagnosis.
"""

import pytest
import torch
from torch.nn.utils.rnn import pad_sequence

from course import check, decoding
from course.check.decoding import _CASES, _MIN_GAP, _decode, _expected
from course.masking import causal_mask, padding_mask
from course.transformer import Transformer
from course.utils import use_threads


@torch.no_grad()
def good(model, src, max_len, bos_id, eos_id):
    """The lesson's way; each mistake below changes one thing."""
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
    memory = model.encode(src, src_mask)  # (B, T_src, d_model)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool)  # (B,)
    for _ in range(max_len):
        logits = model.decode(tokens, memory, src_mask)  # (B, t, V)
        next_token = logits[:, -1].argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t + 1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


# ------------------------------------------------------ correct alternatives ----------


@torch.no_grad()
def one_sentence_at_a_time(model, src, max_len, bos_id, eos_id):
    """Each sentence alone, its padding cut off, then padded back together."""
    outputs = []
    for row in src:
        words = row[row != model.pad_id][None]  # (1, length): no padding, so no mask
        memory = model.encode(words)
        tokens = [bos_id]
        while len(tokens) <= max_len:
            logits = model.decode(torch.tensor([tokens]), memory)  # (1, t, V)
            tokens.append(int(logits[0, -1].argmax()))
            if tokens[-1] == eos_id:
                break
        outputs.append(torch.tensor(tokens[1:]))
    return pad_sequence(outputs, batch_first=True, padding_value=model.pad_id)


@torch.no_grad()
def to_max_len_then_trim(model, src, max_len, bos_id, eos_id):
    """Runs every step to max_len, padding with torch.where, then cuts the columns that
    are padding only (the reference stops as soon as all are done: none are left)."""
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((len(src), 1), bos_id)
    for _ in range(max_len):
        best = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        ended = (tokens == eos_id).any(dim=1)
        best = torch.where(ended, torch.full_like(best, model.pad_id), best)
        tokens = torch.cat([tokens, best.unsqueeze(1)], dim=1)
    out = tokens[:, 1:]
    used = (out != model.pad_id).any(dim=0).nonzero()
    return out[:, : int(used.max()) + 1]


def in_a_no_grad_block(model, src, max_len, bos_id, eos_id):
    """`with torch.no_grad():` inside instead of the decorator; the steps kept in a list
    and stacked; log-probabilities' max."""
    steps = []
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    with torch.no_grad():
        src_mask = padding_mask(src, model.pad_id)
        memory = model.encode(src, src_mask)
        for _ in range(max_len):
            tgt = torch.cat(
                [torch.full((src.shape[0], 1), bos_id), *[s[:, None] for s in steps]], 1
            )
            log_probs = model.decode(tgt, memory, src_mask).log_softmax(dim=-1)
            step = log_probs[:, -1, :].max(dim=-1).indices
            step[finished] = model.pad_id
            steps.append(step)
            finished |= step == eos_id
            if bool(finished.all()):
                break
    return torch.stack(steps, dim=1)


@torch.inference_mode()
def own_causal_mask_and_a_buffer(model, src, max_len, bos_id, eos_id):
    """causal_mask(t) passed by hand, topk, the output written into a buffer; inference
    mode (no_grad's stricter sibling)."""
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    out = torch.full((B, max_len + 1), model.pad_id, dtype=torch.long)
    out[:, 0] = bos_id
    alive = torch.ones(B, dtype=torch.bool)
    t = 0
    while t < max_len and alive.any():
        logits = model.decode(out[:, : t + 1], memory, src_mask, causal_mask(t + 1))
        chosen = logits[:, t].topk(1, dim=-1).indices[:, 0]
        out[:, t + 1] = torch.where(alive, chosen, model.pad_id)
        alive = alive & (chosen != eos_id)
        t += 1
    return out[:, 1 : t + 1]


@torch.no_grad()
def refeeds_every_positions_argmax(model, src, max_len, bos_id, eos_id):
    """Feeds back the argmax of *every* position, not only the last one's. Wasteful, and
    right: under the causal mask position k's logits depend on the prefix up to k only, so
    its argmax is the token chosen at step k again, and the prefix comes out unchanged (the
    rows that ended get the model's words instead of padding, which never reach the output)."""
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    fed = torch.full((B, 1), bos_id, dtype=torch.long)
    out = torch.empty(B, 0, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        predicted = model.decode(fed, memory, src_mask).argmax(dim=-1)  # (B, t)
        fed = torch.cat([fed[:, :1], predicted], dim=1)  # (B, t + 1)
        next_token = predicted[:, -1].masked_fill(done, model.pad_id)
        out = torch.cat([out, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return out


@torch.no_grad()
def sets_eval_mode_itself(model, src, max_len, bos_id, eos_id):
    """model.eval() (the mode it was in already), log_softmax then argmax."""
    model.eval()
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        log_probs = model.decode(tokens, memory, src_mask)[:, -1].log_softmax(dim=-1)
        next_token = torch.where(done, model.pad_id, log_probs.argmax(dim=-1))
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


RIGHT = [good, one_sentence_at_a_time, to_max_len_then_trim, in_a_no_grad_block,
         own_causal_mask_and_a_buffer, refeeds_every_positions_argmax,
         sets_eval_mode_itself]  # fmt: skip


@pytest.mark.parametrize("answer", RIGHT, ids=[a.__name__ for a in RIGHT])
def test_greedy_decode_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.greedy_decode, answer)
    assert passed is True and printed.startswith("✅ greedy_decode: passed"), printed


# ------------------------------------------------------------ wrong answers ----------
# Each is `good` with one thing changed (the line marked "<-").


def stub(model, src, max_len, bos_id, eos_id):
    # YOUR CODE HERE
    raise NotImplementedError


def _loop(model, src, max_len, bos_id, eos_id, step, *, pad=None, src_mask=None):
    """`good`'s loop with the step (tokens, memory, src_mask, done) -> next_token replaced."""
    pad = model.pad_id if pad is None else pad
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id) if src_mask is None else src_mask
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        next_token = step(tokens, memory, src_mask).masked_fill(done, pad)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


def no_causal_mask(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        t = tokens.shape[1]
        everything = torch.ones(t, t, dtype=torch.bool)  # <-
        return model.decode(tokens, memory, src_mask, everything)[:, -1].argmax(-1)

    return _loop(model, src, max_len, bos_id, eos_id, step)


def padding_only_tgt_mask(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        tgt_mask = padding_mask(tokens, model.pad_id)  # <- (B, 1, 1, t): no causal part
        return model.decode(tokens, memory, src_mask, tgt_mask)[:, -1].argmax(-1)

    return _loop(model, src, max_len, bos_id, eos_id, step)


def feeds_bos_only(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(tokens[:, :1], memory, src_mask)[:, -1].argmax(-1)  # <-

    return _loop(model, src, max_len, bos_id, eos_id, step)


def first_position_logits(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(tokens, memory, src_mask)[:, 0].argmax(-1)  # <-

    return _loop(model, src, max_len, bos_id, eos_id, step)


def feeds_last_token_only(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(tokens[:, -1:], memory, src_mask)[:, -1].argmax(-1)  # <-

    return _loop(model, src, max_len, bos_id, eos_id, step)


def feeds_the_source(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(src, memory, src_mask)[:, -1].argmax(-1)  # <-

    return _loop(model, src, max_len, bos_id, eos_id, step)


def softmax_over_the_batch(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        probs = model.decode(tokens, memory, src_mask)[:, -1].softmax(dim=0)  # <-
        return probs.argmax(dim=-1)

    return _loop(model, src, max_len, bos_id, eos_id, step)


def softmax_over_time(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        probs = model.decode(tokens, memory, src_mask).softmax(dim=1)  # <-
        return probs[:, -1].argmax(dim=-1)

    return _loop(model, src, max_len, bos_id, eos_id, step)


def argmax_over_the_batch(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(tokens, memory, src_mask)[:, -1].argmax(dim=0)  # <- (V,)

    return _loop(model, src, max_len, bos_id, eos_id, step)


def argmax_over_time(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(tokens, memory, src_mask).argmax(dim=1)[:, -1]  # <-

    return _loop(model, src, max_len, bos_id, eos_id, step)


def samples(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        probs = model.decode(tokens, memory, src_mask)[:, -1].softmax(dim=-1)
        return torch.multinomial(probs, 1)[:, 0]  # <-

    return _loop(model, src, max_len, bos_id, eos_id, step)


def forgets_the_src_mask(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(tokens, memory)[:, -1].argmax(-1)  # <-

    return _loop(model, src, max_len, bos_id, eos_id, step)


def no_src_mask_at_all(model, src, max_len, bos_id, eos_id):
    everything = torch.ones(src.shape[0], 1, 1, src.shape[1], dtype=torch.bool)  # <-

    def step(tokens, memory, src_mask):
        return model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)

    return _loop(model, src, max_len, bos_id, eos_id, step, src_mask=everything)


def encoder_unmasked(model, src, max_len, bos_id, eos_id):
    everything = torch.ones(src.shape[0], 1, 1, src.shape[1], dtype=torch.bool)
    memory = model.encode(src, everything)  # <-

    def step(tokens, _, src_mask):
        return model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)

    return _loop(model, src, max_len, bos_id, eos_id, step)


def _argmax_step(model):
    def step(tokens, memory, src_mask):
        return model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)

    return step


def pads_with_zero(model, src, max_len, bos_id, eos_id):
    return _loop(model, src, max_len, bos_id, eos_id, _argmax_step(model), pad=0)  # <-


def src_mask_with_pad_zero(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, 0)  # <-
    return _loop(model, src, max_len, bos_id, eos_id, _argmax_step(model), src_mask=src_mask)


def pad_zero_everywhere(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, 0)  # <-
    step = _argmax_step(model)
    return _loop(model, src, max_len, bos_id, eos_id, step, pad=0, src_mask=src_mask)  # <-


def bos_is_one(model, src, max_len, bos_id, eos_id):
    return good(model, src, max_len, 1, eos_id)  # <-


def eos_is_two(model, src, max_len, bos_id, eos_id):
    return good(model, src, max_len, bos_id, 2)  # <-


def _variant(**how):
    """Answers whose control flow changes: one of `good`'s lines, by name."""

    def answer(model, src, max_len, bos_id, eos_id):
        B = src.shape[0]
        src_mask = padding_mask(src, model.pad_id)
        memory = model.encode(src, src_mask)
        tokens = torch.full((B, 1), bos_id, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        for _ in range(max_len + how.get("extra_steps", 0)):
            logits = model.decode(tokens, memory, src_mask)
            next_token = logits[:, -1].argmax(dim=-1)
            if how.get("done_first"):
                done = done | (next_token == eos_id)
            if how.get("pad", True):
                next_token = next_token.masked_fill(done, model.pad_id)
            if not how.get("done_first"):
                done = done | (next_token == eos_id)
            if how.get("stop") == "before append" and done.all():
                break
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)
            if how.get("stop") == "any" and done.any():
                break
            if how.get("stop", "all") == "all" and done.all():
                break
        return tokens if how.get("keep_bos") else tokens[:, 1:]

    answer.__name__ = "_".join(f"{k}={v}" for k, v in how.items())
    return answer


def if_on_a_tensor(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if next_token == eos_id:  # <- one sentence's way
            break
    return tokens[:, 1:]


def ends_when_the_last_token_is_eos(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        ended = tokens[:, -1] == eos_id  # <- only the step right after <eos> is padded
        tokens = torch.cat([tokens, next_token.masked_fill(ended, model.pad_id)[:, None]], 1)
        if (tokens == eos_id).any(dim=1).all():
            break
    return tokens[:, 1:]


def repeats_eos_as_padding(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        return model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)

    return _loop(model, src, max_len, bos_id, eos_id, step, pad=eos_id)  # <-


def until_all_done(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    while not done.all():  # <- max_len unused
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        next_token = next_token.masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
    return tokens[:, 1:]


def argmax_without_dim(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        logits = model.decode(tokens, memory, src_mask)[:, -1]
        return torch.stack([logits.argmax() for _ in range(len(src))])  # <- flattened

    return _loop(model, src, max_len, bos_id, eos_id, step)


def item_on_the_batch(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if next_token.item() == eos_id:  # <- one sentence's way
            break
    return tokens[:, 1:]


def pads_with_minus_one(model, src, max_len, bos_id, eos_id):
    return _loop(model, src, max_len, bos_id, eos_id, _argmax_step(model), pad=-1)  # <-


def trains_the_model(model, src, max_len, bos_id, eos_id):
    model.train()  # <-
    return good(model, src, max_len, bos_id, eos_id)


def trains_and_restores(model, src, max_len, bos_id, eos_id):
    model.train()  # <-
    out = good(model, src, max_len, bos_id, eos_id)
    model.eval()
    return out


def returns_a_list(model, src, max_len, bos_id, eos_id):
    return list(good(model, src, max_len, bos_id, eos_id).T)  # <- the steps


def returns_floats(model, src, max_len, bos_id, eos_id):
    return good(model, src, max_len, bos_id, eos_id).float()  # <-


def stacks_along_dim_0(model, src, max_len, bos_id, eos_id):
    return torch.stack(list(good(model, src, max_len, bos_id, eos_id).T), dim=0)  # <-


def keeps_a_trailing_axis(model, src, max_len, bos_id, eos_id):
    return torch.stack(list(good(model, src, max_len, bos_id, eos_id).T[..., None]), dim=1)


def edits_src_in_place(model, src, max_len, bos_id, eos_id):
    out = good(model, src, max_len, bos_id, eos_id)
    src.masked_fill_(src == model.pad_id, eos_id)  # <- the caller's src changes
    return out


@torch.no_grad()
def forward_each_step(model, src, max_len, bos_id, eos_id):
    """model(src, tgt) at every step: the right tokens, but the encoder runs again each time
    (lesson 09: "the encoder runs once")."""
    B = src.shape[0]
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        next_token = model(src, tokens)[:, -1].argmax(dim=-1)  # <- encode + decode each step
        next_token = next_token.masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


@torch.no_grad()
def encodes_at_every_step(model, src, max_len, bos_id, eos_id):
    def step(tokens, memory, src_mask):
        memory = model.encode(src, src_mask)  # <- memory made again at every step
        return model.decode(tokens, memory, src_mask)[:, -1].argmax(dim=-1)

    return _loop(model, src, max_len, bos_id, eos_id, step)


def without_no_grad(model, src, max_len, bos_id, eos_id):  # <- no @torch.no_grad()
    return good.__wrapped__(model, src, max_len, bos_id, eos_id)


def detaches_instead_of_no_grad(model, src, max_len, bos_id, eos_id):
    return _loop(
        model,
        src,
        max_len,
        bos_id,
        eos_id,
        lambda tokens, memory, mask: (
            model.decode(tokens, memory, mask).detach()[:, -1].argmax(dim=-1)
        ),
    )  # <- the graph is built anyway


def eos_id_and_bos_id_swapped(model, src, eos_id, bos_id, max_len):  # <- the order
    return good(model, src, max_len, bos_id, eos_id)


CASE = [case.what for case in _CASES]
ENCODER = "your tokens are right, but the encoder ran at every step: it encoded "
NO_GRAD = (
    "your tokens are right, but the model ran with gradients on: every step keeps its "
    "activations for a backward pass that never comes (.detach() afterwards does not "
    "prevent that). Nothing in decoding needs gradients: decorate greedy_decode with "
    "@torch.no_grad(), as the lesson asks (or decode inside `with torch.no_grad():`)"
)
WRONG = [
    (stub, "⏳ greedy_decode: not implemented yet"),
    (eos_id_and_bos_id_swapped, "❌ greedy_decode: your parameters come in the order (model, "
     "src, eos_id, bos_id, max_len); the lesson's signature is greedy_decode(model, src, "
     "max_len, bos_id, eos_id)"),
    (no_causal_mask, f"on {CASE[0]}, the decoder runs without its causal mask"),
    (padding_only_tgt_mask, f"on {CASE[0]}, the decoder runs without its causal mask"),
    (feeds_bos_only, f"on {CASE[0]}, every step chooses the same token: the decoder's input "
     "does not grow"),
    (first_position_logits, f"on {CASE[0]}, every step chooses the same token"),
    (feeds_last_token_only, f"on {CASE[0]}, the decoder is fed only the last token chosen"),
    (feeds_the_source, f"on {CASE[0]}, the decoder is fed the source sentence: it reads the "
     "source only through memory"),
    (softmax_over_the_batch, f"on {CASE[0]}, the softmax before the argmax is taken over the "
     "batch (dim=0)"),
    (softmax_over_time, f"on {CASE[0]}, the softmax before the argmax is taken over the "
     "positions (dim=1)"),
    (argmax_over_the_batch, "must match the size of tensor b (10) at non-singleton dimension 0. "
     "A size 10, the vocabulary's, came where the batch's was expected"),
    (argmax_over_time, f"on {CASE[0]}, sentence 0, step 1: your code chose token 0, but "
     "after <bos> the model's most likely next token is 3"),
    (ends_when_the_last_token_is_eos, f"on {CASE[0]}, sentence 0 has 3 at step 6, after its "
     "<eos>: pad with model.pad_id (0) once a sentence is done"),
    (repeats_eos_as_padding, f"on {CASE[0]}, sentence 0 has 2 at step 5, after its <eos>"),
    (until_all_done, "longer than max_len=32: build the Transformer with a larger max_len, or "
     "cut the sequence. Your loop went on past max_len steps"),
    (argmax_without_dim, "Your code fed the decoder ids outside its vocabulary"),
    (pads_with_minus_one, "tgt holds token ids from -1 to"),
    (samples, f"on {CASE[0]}, two calls on the same inputs gave different tokens"),
    (_variant(stop="any"), f"on {CASE[0]}, every sentence stops at the first <eos> of any"),
    (_variant(stop="never"), f"on {CASE[0]}, the output runs to max_len with padding after "
     "each <eos>"),
    (_variant(pad=False), f"on {CASE[0]}, no padding after <eos>"),
    (_variant(pad=False, stop="never"), f"on {CASE[0]}, your code does not stop at <eos>"),
    (_variant(done_first=True), f"on {CASE[0]}, <eos> is missing"),
    (_variant(keep_bos=True), f"on {CASE[0]}, the output starts with <bos>"),
    (_variant(extra_steps=1), f"on {CASE[1]}, the output is one step too long"),
    (_variant(extra_steps=-1), f"on {CASE[1]}, the output is one step too short"),
    (_variant(stop="before append"), f"on {CASE[0]}, the last sentence to end lacks its <eos>"),
    (forgets_the_src_mask, f"on {CASE[5]}, the source's padding is not masked: pass the "
     "src_mask to the decoder too"),
    (no_src_mask_at_all, f"on {CASE[5]}, the encoder does not mask the source's padding"),
    (encoder_unmasked, f"on {CASE[5]}, the encoder does not mask the source's padding"),
    (bos_is_one, f"on {CASE[6]}, your code starts with token 1, not bos_id (here 5)"),
    (eos_is_two, f"on {CASE[6]}, your code ends sentences at token 2, not eos_id (here 4)"),
    (pads_with_zero, f"on {CASE[6]}, your code pads with 0 after <eos>: write model.pad_id "
     "(here 3)"),
    (src_mask_with_pad_zero, f"on {CASE[6]}, your code builds the src_mask with pad 0"),
    (pad_zero_everywhere, f"on {CASE[6]}, your code pads with 0 after <eos> and masks the "
     "source's 0s"),
    (if_on_a_tensor, "Boolean value of Tensor with more than one value is ambiguous. "
     "`if next_token == eos_id:` asks about all B sentences at once"),
    (item_on_the_batch, "cannot be converted to Scalar. `.item()` or `int(...)` reads one "
     "sentence's token; there are B"),
    (trains_the_model, "your code puts the model in training mode (model.train()) and leaves "
     "it there"),
    (trains_and_restores, "your code puts the model in training mode (model.train()) while "
     "decoding"),
    (returns_a_list, f"on {CASE[0]}, the output is a list: return one (B, T_out) tensor"),
    (returns_floats, f"on {CASE[0]}, the output is float32: token ids are torch.long"),
    (stacks_along_dim_0, f"on {CASE[0]}, the output is (T_out, B), one row per step"),
    (keeps_a_trailing_axis, f"on {CASE[0]}, the output has a trailing axis of size 1"),
    (edits_src_in_place, "your code changed one of its input tensors in place"),
    (forward_each_step, f"on {CASE[0]}, {ENCODER}"),
    (encodes_at_every_step, f"on {CASE[0]}, {ENCODER}"),
    (without_no_grad, f"on {CASE[0]}, {NO_GRAD}"),
    (detaches_instead_of_no_grad, f"on {CASE[0]}, {NO_GRAD}"),
]  # fmt: skip


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_greedy_decode_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.greedy_decode, answer)
    verdict_start = diagnosis if diagnosis.startswith(("⏳", "❌")) else "❌ greedy_decode: "
    assert passed is False and printed.startswith(verdict_start), printed
    assert diagnosis in printed, printed


# ------------------------------------------------------------- the cases ----------


@pytest.fixture(autouse=True)
def one_thread():
    """The tests below decode tiny models, as the checker does: on one thread (on a busy
    2-core machine, several times faster)."""
    with use_threads(1):
        yield


def _reference(case):
    return decoding.greedy_decode(case.model(), case.source(), *case.args())


def _ends(out, eos_id):
    """The step (1-based) of each sentence's <eos>, or None."""
    return [row.index(eos_id) + 1 if eos_id in row else None for row in out.tolist()]


def test_each_case_shows_what_it_is_named_after():
    outs = [_reference(case) for case in _CASES]
    assert _ends(outs[0], 2) == [4, 2, 6, 3] and outs[0].shape[1] < _CASES[0].max_len
    assert _ends(outs[1], 2) == [2, None, 4] and outs[1].shape[1] == _CASES[1].max_len
    assert outs[2].shape == (1, 9) and _ends(outs[2], 2) == [9]
    assert _ends(outs[3], 2) == [None, None] and outs[3].shape[1] == _CASES[3].max_len
    assert outs[4].shape == (3, 1)
    assert (torch.tensor(_CASES[5].src) == 0).any(dim=1).tolist() == [False, True, True]
    assert _ends(outs[6], 4) == [4, 3, 5] and (torch.tensor(_CASES[6].src) == 3).any()


def test_every_step_of_every_case_has_a_clear_winner():
    """The best logit leads the second by _MIN_GAP at every step the reference takes, so an
    answer that computes in another order (float rounding) picks the same tokens."""
    for case in _CASES:
        model, src = case.model(), case.source()
        out = _reference(case)
        B = src.shape[0]
        with torch.no_grad():
            mask = padding_mask(src, model.pad_id)
            fed = torch.cat([torch.full((B, 1), case.bos_id), out[:, :-1]], dim=1)
            logits = model.decode(fed, model.encode(src, mask), mask)  # (B, T_out, V)
        top2 = logits.topk(2, dim=-1).values
        gap = top2[..., 0] - top2[..., 1]  # (B, T_out)
        live = torch.cat([torch.ones(B, 1, dtype=torch.bool),
                          (out[:, :-1] == case.eos_id).cumsum(1) == 0], 1)  # fmt: skip
        assert float(gap[live].min()) > _MIN_GAP, case.what


def test_the_parametrised_reference_is_the_reference():
    for case in _CASES:
        reference = _reference(case)
        assert torch.equal(_decode(case.model(), case.source(), *case.args()), reference)
        assert torch.equal(_expected(case), reference)


def test_feeding_bos_alone_is_reading_the_first_position():
    """Under the causal mask position 0 sees only <bos>: one diagnosis names both."""
    for case in _CASES:
        args = case.model(), case.source(), *case.args()
        assert torch.equal(_decode(*args, feed="bos"), _decode(*args, position=0))


def test_a_missing_causal_mask_cannot_show_with_one_decoder_layer():
    """Why the checker's models have two decoder layers (see course/check/decoding.py)."""
    torch.manual_seed(0)
    model = Transformer(10, 10, d_model=16, n_heads=2, n_layers=1, d_ff=32).eval()
    src = torch.randint(3, 10, (50, 6))
    tokens = torch.randint(3, 10, (50, 7))
    with torch.no_grad():
        memory = model.encode(src)
        causal = model.decode(tokens, memory)[:, -1]
        everything = torch.ones(7, 7, dtype=torch.bool)
        unmasked = model.decode(tokens, memory, None, everything)[:, -1]
    assert torch.equal(causal, unmasked)
    model = Transformer(10, 10, d_model=16, n_heads=2, n_layers=2, d_ff=32).eval()
    with torch.no_grad():
        memory = model.encode(src)
        causal = model.decode(tokens, memory)[:, -1]
        unmasked = model.decode(tokens, memory, None, everything)[:, -1]
    assert not torch.allclose(causal, unmasked, atol=1e-3)


def test_the_checker_restores_the_thread_count():
    threads = torch.get_num_threads()
    check.greedy_decode(trains_the_model)
    check.greedy_decode(good)
    assert torch.get_num_threads() == threads


def test_the_encoder_at_every_step_is_named_in_full(verdict):
    """Case 0 ends at step 6: model(src, tgt) at each step encodes its 4 sentences 6 times."""
    passed, printed = verdict(check.greedy_decode, forward_each_step)
    assert passed is False
    assert printed == (
        f"❌ greedy_decode: on {CASE[0]}, your tokens are right, but the encoder ran at every "
        "step: it encoded 24 source sentences for a batch of 4. The source does not change "
        "while decoding, so the encoder runs once, before the loop: memory = model.encode(src, "
        "src_mask); each step then calls model.decode(tokens, memory, src_mask) (model(src, "
        "tgt) runs the encoder again every time)\n"
    )


# ------------------------------------------- issue 32: <bos> kept, named first ----------


@torch.no_grad()
def greedy_keeping_bos(model, src, max_len, bos_id, eos_id):
    """A textbook greedy decoder adapted to the signature only: it returns the prefix with
    its <bos>, runs max_len - 1 steps, and never stops at <eos>."""
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    for _ in range(max_len - 1):
        out = model.decode(ys, memory, src_mask)
        next_word = out[:, -1].argmax(dim=-1)
        ys = torch.cat([ys, next_word[:, None]], dim=1)
    return ys


def test_a_kept_bos_is_named_before_the_rest(verdict):
    passed, printed = verdict(check.greedy_decode, greedy_keeping_bos)
    assert passed is False and printed.startswith("❌ greedy_decode: "), printed
    assert "the output starts with <bos>: leave it out" in printed, printed
    assert "chose token" not in printed.split("without it")[0], printed
