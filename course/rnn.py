"""Recurrent networks and their limits (lesson 01).

A vanilla RNN reads a sequence one position at a time and keeps everything it has
seen in one hidden vector:

    h_t = tanh(x_t W_xh + h_{t-1} W_hh + b),    t = 1 .. T,   h_0 given (or zeros)

Three limits follow from that one line, and the lesson measures each:
- T steps that must run one after the other (h_t needs h_{t-1}): no parallelism over time;
- information from x_1 reaches h_T through T - 1 multiplications by W_hh and tanh's
  slope, so the gradient of h_T with respect to far inputs shrinks (`gradient_by_distance`);
- an encoder-decoder without attention squeezes the whole source into the encoder's
  last hidden state, a vector of d_hidden numbers whatever the length (`Seq2SeqRNN`).

`Seq2SeqRNN` is also the baseline that lesson 09 trains on the Transformer's task:
GRU or LSTM, with or without Bahdanau-style additive attention. `TutorialSeq2Seq` is
lesson 11's baseline: the GRU encoder-decoder of PyTorch's translation tutorial, whose
decoder attends before each GRU step, so that teacher-forced training loops over time.

Shapes, as everywhere in the course: batch first, x (B, T, d_in), hidden states (B, T, d_h).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course.attention import masked_softmax
from course.decoding import _check_args, greedy_loop
from course.utils import describe, is_token_ids

# ------------------------------------------------------------ vanilla RNN ----------


def _shape(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, torch.Tensor) else type(t).__name__


def _check_rnn_inputs(x, W_xh, W_hh, b, h0) -> None:
    """Raise a ValueError naming what was expected and what came."""
    for name, t in (("x", x), ("W_xh", W_xh), ("W_hh", W_hh), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, d_in), got {_shape(x)}")
    B, T, d_in = x.shape
    if T == 0:
        raise ValueError(f"x must have at least one time step, got shape {_shape(x)}")
    if W_xh.dim() != 2 or W_xh.shape[0] != d_in:
        raise ValueError(
            f"W_xh must have shape (d_in={d_in}, d_h) to match x {_shape(x)}, got {_shape(W_xh)}"
        )
    d_h = W_xh.shape[1]
    if tuple(W_hh.shape) != (d_h, d_h):
        raise ValueError(
            f"W_hh must have shape (d_h, d_h) = {(d_h, d_h)} (d_h from W_xh {_shape(W_xh)}), "
            f"got {_shape(W_hh)}"
        )
    if tuple(b.shape) != (d_h,):
        raise ValueError(f"b must have shape (d_h,) = {(d_h,)}, got {_shape(b)}")
    if h0 is not None and (not isinstance(h0, torch.Tensor) or tuple(h0.shape) != (B, d_h)):
        raise ValueError(f"h0 must have shape (B, d_h) = {(B, d_h)} or be None, got {_shape(h0)}")


def rnn_forward(
    x: torch.Tensor,
    W_xh: torch.Tensor,
    W_hh: torch.Tensor,
    b: torch.Tensor,
    h0: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A vanilla RNN unrolled over time: h_t = tanh(x_t W_xh + h_{t-1} W_hh + b).

    x (B, T, d_in), W_xh (d_in, d_h), W_hh (d_h, d_h), b (d_h,), h0 (B, d_h) or None
    for zeros. Returns (hs, h_T): hs (B, T, d_h) holds h_1 .. h_T, h_T (B, d_h) the last.
    """
    _check_rnn_inputs(x, W_xh, W_hh, b, h0)
    B, T, _ = x.shape
    h = x.new_zeros(B, W_hh.shape[0]) if h0 is None else h0  # (B, d_h): h_0
    # The input half of every step does not depend on h: all positions in one matmul.
    x_part = x @ W_xh + b  # (B, T, d_in) @ (d_in, d_h) -> (B, T, d_h)
    hs = []
    for t in range(T):  # the recurrent half must wait for the previous step
        h = torch.tanh(x_part[:, t] + h @ W_hh)  # (B, d_h)
        hs.append(h)
    return torch.stack(hs, dim=1), h  # (B, T, d_h), (B, d_h)


def to_torch_rnn(W_xh: torch.Tensor, W_hh: torch.Tensor, b: torch.Tensor) -> nn.RNN:
    """A one-layer tanh `torch.nn.RNN` (batch_first=True) that computes `rnn_forward`, same weights.

    torch stores the transposed matrices, weight_ih_l0 (d_h, d_in) and weight_hh_l0
    (d_h, d_h), and two biases that are simply added: we put b in bias_ih_l0 and 0 in
    bias_hh_l0.
    """
    if (
        not all(isinstance(t, torch.Tensor) for t in (W_xh, W_hh, b))
        or W_xh.dim() != 2
        or tuple(W_hh.shape) != (W_xh.shape[1],) * 2
        or b.shape != W_xh.shape[1:]
    ):
        raise ValueError(
            "expected W_xh (d_in, d_h), W_hh (d_h, d_h), b (d_h,); got "
            f"W_xh {_shape(W_xh)}, W_hh {_shape(W_hh)}, b {_shape(b)}"
        )
    d_in, d_h = W_xh.shape
    rnn = nn.RNN(d_in, d_h, nonlinearity="tanh", batch_first=True)
    rnn = rnn.to(dtype=W_xh.dtype, device=W_xh.device)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(W_xh.T)
        rnn.weight_hh_l0.copy_(W_hh.T)
        rnn.bias_ih_l0.copy_(b)
        rnn.bias_hh_l0.zero_()
    return rnn


def from_torch_rnn(rnn: nn.RNN) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(W_xh, W_hh, b) such that `rnn_forward` computes what this one-layer tanh nn.RNN does."""
    if not isinstance(rnn, nn.RNN) or rnn.num_layers != 1 or rnn.bidirectional:
        raise ValueError(f"expected a one-layer, one-direction torch.nn.RNN, got {rnn!r}")
    if rnn.nonlinearity != "tanh":
        raise ValueError(f"expected nonlinearity='tanh', got {rnn.nonlinearity!r}")
    W_xh = rnn.weight_ih_l0.detach().T.clone()  # (d_h, d_in) -> (d_in, d_h)
    W_hh = rnn.weight_hh_l0.detach().T.clone()  # (d_h, d_h), transposed
    if rnn.bias:
        b = (rnn.bias_ih_l0 + rnn.bias_hh_l0).detach().clone()  # (d_h,): the two biases add up
    else:
        b = W_xh.new_zeros(rnn.hidden_size)
    return W_xh, W_hh, b


# ------------------------------------------------- gradient vs distance ----------


def gradient_by_distance(rnn: nn.RNNBase, x: torch.Tensor) -> torch.Tensor:
    """How much the last hidden state h_T depends on each input, by distance from the end.

    rnn: any batch_first torch recurrent layer (nn.RNN, nn.LSTM, nn.GRU); x (B, T, d_in).
    Returns a tensor (T,) whose entry k is the size (Frobenius norm) of the Jacobian
    d h_T / d x_{T-k}, averaged over the batch: k = 0 is the last input, k = T - 1 the first.
    """
    if not getattr(rnn, "batch_first", False):
        raise ValueError("gradient_by_distance expects a batch_first=True recurrent layer")
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != rnn.input_size:
        raise ValueError(f"x must have shape (B, T, d_in={rnn.input_size}), got {_shape(x)}")

    def last_hidden_summed_over_batch(inputs):  # (B, T, d_in) -> (d_h,)
        outputs, _ = rnn(inputs)  # (B, T, d_h)
        # batch items are independent, so d(sum_b h_T[b]) / d x[b] = d h_T[b] / d x[b]
        return outputs[:, -1].sum(dim=0)

    jacobian = torch.autograd.functional.jacobian(
        last_hidden_summed_over_batch, x.detach(), vectorize=True
    )  # (d_h, B, T, d_in)
    norms = jacobian.pow(2).sum(dim=(0, 3)).sqrt()  # (B, T): one norm per input position
    return norms.mean(dim=0).flip(0)  # (T,), indexed by distance T - t


# ------------------------------------------------------- a digit task ----------

PAD, BOS, EOS = 0, 1, 2
FIRST_DIGIT = 3  # token of digit d is FIRST_DIGIT + d
DIGIT_VOCAB = FIRST_DIGIT + 10  # pad, begin, end and ten digits


def digit_task(
    n: int,
    lengths: list[int] | range,
    generator: torch.Generator,
    reverse: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random digit strings to copy (or reverse): (src, tgt_in, tgt_out), padded to max(lengths).

    Each length is drawn uniformly from `lengths`; L = max(lengths). src (n, L) holds the digits
    then PAD; tgt_in (n, L + 1) is BOS then the answer (teacher forcing's inputs);
    tgt_out (n, L + 1) is the answer then EOS: what the decoder must predict at each step.
    """
    lengths = torch.tensor(list(lengths))
    L = int(lengths.max())
    length = lengths[torch.randint(len(lengths), (n,), generator=generator)]  # (n,)
    digits = torch.randint(10, (n, L), generator=generator) + FIRST_DIGIT  # (n, L)
    real = torch.arange(L) < length[:, None]  # (n, L): True on the first `length` places
    src = digits.where(real, PAD)  # (n, L)
    answer = src
    if reverse:  # read each sequence's real digits backwards, keep the padding at the end
        backwards = (length[:, None] - 1 - torch.arange(L)).clamp(min=0)  # (n, L)
        answer = src.gather(1, backwards).where(real, PAD)
    pad_column = torch.full((n, 1), PAD)
    tgt_in = torch.cat([torch.full((n, 1), BOS), answer], dim=1)  # (n, L + 1)
    tgt_out = torch.cat([answer, pad_column], dim=1)  # (n, L + 1)
    tgt_out[torch.arange(n), length] = EOS  # EOS right after the last digit
    return src, tgt_in, tgt_out


# ------------------------------------------------------------- seq2seq ----------


def _padding_at_the_end(real: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Lengths (B,) of a (B, T_src) mask, True on real tokens; every row must have one real
    token, and its padding must come after them (what packed sequences need)."""
    lengths = real.sum(dim=1)  # (B,)
    if (lengths == 0).any():
        raise ValueError("every source sequence needs at least one token that is not padding")
    if (real[:, 1:] & ~real[:, :-1]).any():
        raise ValueError(f"padding (pad_id={pad_id}) must come at the end of each row")
    return lengths


def _source_mask(src: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Check sources (B, T_src); return (mask (B, T_src), True on real tokens; lengths (B,))."""
    if not isinstance(src, torch.Tensor) or src.dim() != 2:
        raise ValueError(f"src must be token ids of shape (B, T_src), got {_shape(src)}")
    if not is_token_ids(src):
        raise ValueError(f"src must be integer token ids of shape (B, T_src), got {describe(src)}")
    real = src != pad_id  # (B, T_src)
    return real, _padding_at_the_end(real, pad_id)


class Encoded(NamedTuple):
    """What the encoder hands the decoder."""

    memory: torch.Tensor  # (B, T_src, d_hidden): every encoder state (zeros on padding)
    state: torch.Tensor | tuple[torch.Tensor, torch.Tensor]  # h (1, B, d_hidden), or (h, c)
    src_mask: torch.Tensor  # (B, T_src) bool: True on real tokens


class AdditiveAttention(nn.Module):
    """Additive attention (Bahdanau et al., 2015): score = v . tanh(W_q query + W_m memory_j).

    forward(queries (B, T_q, d_hidden), memory (B, T_src, d_hidden), src_mask (B, T_src))
    -> (context (B, T_q, d_hidden), weights (B, T_q, T_src)); padding gets weight 0.
    """

    def __init__(self, d_hidden: int):
        super().__init__()
        self.w_query = nn.Linear(d_hidden, d_hidden, bias=False)
        self.w_memory = nn.Linear(d_hidden, d_hidden)
        self.v = nn.Linear(d_hidden, 1, bias=False)

    def forward(self, queries, memory, src_mask):
        q = self.w_query(queries)[:, :, None]  # (B, T_q, 1, d_h)
        m = self.w_memory(memory)[:, None]  # (B, 1, T_src, d_h)
        scores = self.v(torch.tanh(q + m)).squeeze(-1)  # (B, T_q, T_src)
        weights = masked_softmax(scores, src_mask[:, None])  # (B, T_q, T_src), rows sum to 1
        context = weights @ memory  # (B, T_q, T_src) @ (B, T_src, d_h) -> (B, T_q, d_h)
        return context, weights


class Seq2SeqRNN(nn.Module):
    """An RNN encoder-decoder (GRU or LSTM), with or without additive attention.

    forward(src (B, T_src), tgt_in (B, T_tgt)) -> logits (B, T_tgt, tgt_vocab), the
    Transformer's contract. Source padding (pad_id) must come at the end of each row;
    it changes nothing: the encoder stops at each sequence's last real token
    (packed sequences) and attention gives padding zero weight.

    Without attention the decoder sees the source only through the encoder's last state,
    one vector of d_hidden numbers (the "context vector"). With attention, every decoder
    output also reads a weighted average of all encoder states, with Bahdanau's additive
    scores placed after the decoder RNN as in Luong et al. (2015): teacher-forced training
    then runs the decoder over the whole target in one call. The latest weights,
    (B, T_tgt, T_src), are kept in `self.attn` for plotting.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_embed: int = 32,
        d_hidden: int = 64,
        cell: str = "gru",
        attention: bool = False,
        pad_id: int = 0,
    ):
        super().__init__()
        cells = {"gru": nn.GRU, "lstm": nn.LSTM}
        if cell not in cells:
            raise ValueError(f"cell must be one of {sorted(cells)}, got {cell!r}")
        self.cell, self.pad_id, self.d_hidden = cell, pad_id, d_hidden
        self.src_embed = nn.Embedding(src_vocab, d_embed, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_embed, padding_idx=pad_id)
        self.encoder = cells[cell](d_embed, d_hidden, batch_first=True)
        self.decoder = cells[cell](d_embed, d_hidden, batch_first=True)
        self.attention = AdditiveAttention(d_hidden) if attention else None
        self.out = nn.Linear(d_hidden * (2 if attention else 1), tgt_vocab)
        self.attn: torch.Tensor | None = None

    def encode(self, src: torch.Tensor) -> Encoded:
        src_mask, lengths = _source_mask(src, self.pad_id)  # (B, T_src), (B,)
        embedded = self.src_embed(src)  # (B, T_src, d_embed)
        packed = pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        packed_states, state = self.encoder(packed)  # state: each row's last *real* step
        memory, _ = pad_packed_sequence(
            packed_states, batch_first=True, total_length=src.shape[1]
        )  # (B, T_src, d_hidden), zeros on padding
        return Encoded(memory, state, src_mask)

    def decode(
        self, tgt_in: torch.Tensor, encoded: Encoded, state=None
    ) -> tuple[torch.Tensor, torch.Tensor | tuple[torch.Tensor, torch.Tensor]]:
        """Logits (B, T_tgt, tgt_vocab) and the decoder's state after the last step.

        `state` defaults to the encoder's last state; pass the returned one back to
        continue decoding one token at a time.
        """
        state = encoded.state if state is None else state
        embedded = self.tgt_embed(tgt_in)  # (B, T_tgt, d_embed)
        outputs, state = self.decoder(embedded, state)  # (B, T_tgt, d_hidden)
        if self.attention is None:  # nothing of the source but `state` reached the decoder
            return self.out(outputs), state
        context, weights = self.attention(outputs, encoded.memory, encoded.src_mask)
        # context (B, T_tgt, d_hidden): for every target step, its own mix of source states
        self.attn = weights.detach()  # (B, T_tgt, T_src)
        return self.out(torch.cat([outputs, context], dim=-1)), state  # (B, T_tgt, tgt_vocab)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        logits, _ = self.decode(tgt_in, self.encode(src))
        return logits  # (B, T_tgt, tgt_vocab)

    @torch.no_grad()
    def generate(self, src: torch.Tensor, bos_id: int, eos_id: int, max_len: int) -> torch.Tensor:
        """Greedy decoding: (B, max_len) tokens, each row padded with pad_id after its EOS.

        With attention, `self.attn` then holds the weights of every generated step,
        (B, steps, T_src).
        """
        encoded = self.encode(src)
        B = src.shape[0]
        token = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        state, tokens, weights = None, [], []
        finished = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
        for _ in range(max_len):
            logits, state = self.decode(token, encoded, state)  # (B, 1, tgt_vocab)
            token = logits.argmax(dim=-1)  # (B, 1)
            tokens.append(token[:, 0].masked_fill(finished, self.pad_id))
            weights.append(self.attn)
            finished |= token[:, 0] == eos_id
            if finished.all():
                break
        if self.attention is not None:  # every generated step's weights: (B, steps, T_src)
            self.attn = torch.cat(weights, dim=1)
        out = torch.stack(tokens, dim=1)  # (B, steps)
        return nn.functional.pad(out, (0, max_len - out.shape[1]), value=self.pad_id)


# ------------------------------------------- the PyTorch tutorial's model ----------


class TutorialSeq2Seq(nn.Module):
    """The GRU encoder-decoder of PyTorch's tutorial "Translation with a Sequence to
    Sequence Network and Attention", in the course's contract (lesson 11's baseline).

    Encoder: embed, dropout, GRU; its states are the memory, its last state starts the
    decoder. Decoder, at each target step t:

        context_t, weights_t = attention(h_{t-1}, memory)        Bahdanau et al. (2015)
        h_t = GRU([dropout(embed(y_{t-1})), context_t], h_{t-1})
        logits_t = out(h_t)

    Attention sits *before* the GRU step and asks with the previous state h_{t-1}; in
    Seq2SeqRNN it sits after the decoder GRU and asks with h_t (Luong et al., 2015). So
    here the GRU's input at step t needs h_{t-1}, and even teacher-forced training must
    loop over the T_tgt target positions one after the other: decode cannot run the
    decoder GRU over the whole target in one call, as Seq2SeqRNN and the Transformer can.

    encode(src, src_mask=None) -> memory (B, T_src, d_hidden), zeros on padding
    decode(tgt, memory, src_mask) -> logits (B, T_tgt, tgt_vocab); h_0 is memory at each
        row's last real token (a one-layer GRU's last output is its last state)
    forward(src, tgt_in) = decode(tgt_in, encode(src), padding_mask(src, pad_id))
    generate(src, bos_id, eos_id, max_len): greedy_decode's output, one GRU step a token

    Padding (pad_id) must come at the end of each source row. The latest attention
    weights, (B, T_tgt, T_src), are kept in `self.attn` for plotting.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_hidden: int = 128,
        dropout: float = 0.1,
        pad_id: int = 0,
    ):
        super().__init__()
        self.pad_id, self.d_hidden = pad_id, d_hidden
        self.src_embed = nn.Embedding(src_vocab, d_hidden)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_hidden)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.GRU(d_hidden, d_hidden, batch_first=True)
        self.attention = AdditiveAttention(d_hidden)
        self.decoder = nn.GRU(2 * d_hidden, d_hidden, batch_first=True)  # reads [y, context]
        self.out = nn.Linear(d_hidden, tgt_vocab)
        self.attn: torch.Tensor | None = None

    def _real(self, src_mask, B: int, T_src: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The course's padding mask (B, 1, 1, T_src) -> (real (B, T_src), lengths (B,))."""
        if not (
            isinstance(src_mask, torch.Tensor)
            and src_mask.dtype == torch.bool
            and tuple(src_mask.shape) == (B, 1, 1, T_src)
        ):
            raise ValueError(
                f"src_mask must be a bool padding mask of shape (B, 1, 1, T_src) = "
                f"{(B, 1, 1, T_src)} (course.masking.padding_mask), got {describe(src_mask)}"
            )
        real = src_mask[:, 0, 0]  # (B, 1, 1, T_src) -> (B, T_src)
        return real, _padding_at_the_end(real, self.pad_id)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        real, lengths = _source_mask(src, self.pad_id)  # (B, T_src), (B,)
        if src_mask is not None:
            real, lengths = self._real(src_mask, *src.shape)
        embedded = self.dropout(self.src_embed(src))  # (B, T_src) -> (B, T_src, H)
        packed = pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        states, _ = self.encoder(packed)  # each row stops at its last real token
        memory, _ = pad_packed_sequence(
            states, batch_first=True, total_length=src.shape[1]
        )  # (B, T_src, H), zeros on padding
        return memory

    def _step(self, token, h, memory, real):
        """One decoder step: y_{t-1} (B, 1), h_{t-1} (1, B, H) -> logits (B, 1, V), h_t, weights."""
        embedded = self.dropout(self.tgt_embed(token))  # (B, 1) -> (B, 1, H)
        query = h.transpose(0, 1)  # (1, B, H) -> (B, 1, H): the previous state asks
        context, weights = self.attention(query, memory, real)  # (B, 1, H), (B, 1, T_src)
        x = torch.cat([embedded, context], dim=-1)  # (B, 1, 2H)
        output, h = self.decoder(x, h)  # (B, 1, H), h_t (1, B, H)
        return self.out(output), h, weights  # (B, 1, H) -> (B, 1, V)

    def _start(self, memory, src_mask):
        """real (B, T_src), h_0 (1, B, H): memory at each row's last real token."""
        if not isinstance(memory, torch.Tensor) or memory.dim() != 3:
            raise ValueError(f"memory must have shape (B, T_src, d_hidden), got {_shape(memory)}")
        real, lengths = self._real(src_mask, *memory.shape[:2])  # (B, T_src), (B,)
        rows = torch.arange(memory.shape[0], device=memory.device)  # (B,)
        return real, memory[rows, lengths.to(memory.device) - 1][None]  # (B, H) -> (1, B, H)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor):
        real, h = self._start(memory, src_mask)  # (B, T_src), h_0 (1, B, H)
        if not is_token_ids(tgt) or tgt.shape[0] != memory.shape[0]:
            raise ValueError(
                f"tgt must be integer token ids (B={memory.shape[0]}, T_tgt), got {describe(tgt)}"
            )
        logits, weights = [], []
        for t in range(tgt.shape[1]):  # h_t needs h_{t-1}: one position after the other
            step_logits, h, step_weights = self._step(tgt[:, t : t + 1], h, memory, real)
            logits.append(step_logits)  # (B, 1, V)
            weights.append(step_weights)  # (B, 1, T_src)
        self.attn = torch.cat(weights, dim=1).detach()  # (B, T_tgt, T_src)
        return torch.cat(logits, dim=1)  # (B, T_tgt, V)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory = self.encode(src)  # (B, T_src, H); checks src
        return self.decode(tgt_in, memory, (src != self.pad_id)[:, None, None])  # (B, T_tgt, V)

    @torch.no_grad()
    def generate(self, src: torch.Tensor, bos_id: int, eos_id: int, max_len: int) -> torch.Tensor:
        """greedy_decode's (B, T_out) tokens, carrying the GRU's state: one step per token."""
        memory = self.encode(src)  # (B, T_src, H); checks src
        _check_args(self, src, max_len, bos_id, eos_id)
        real, h = self._start(memory, (src != self.pad_id)[:, None, None])  # h_0 (1, B, H)
        weights = []

        def newest_token_logits(tokens: torch.Tensor) -> torch.Tensor:  # (B, t) -> (B, V)
            nonlocal h
            logits, h, step_weights = self._step(tokens[:, -1:], h, memory, real)
            weights.append(step_weights)  # (B, 1, T_src)
            return logits[:, 0]  # (B, 1, V) -> (B, V)

        out = greedy_loop(
            newest_token_logits, src.shape[0], max_len, bos_id, eos_id, self.pad_id, src.device
        )  # (B, T_out)
        self.attn = torch.cat(weights, dim=1)  # (B, T_out, T_src)
        return out
