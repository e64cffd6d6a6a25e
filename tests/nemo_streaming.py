"""Our cache-aware streaming encoder stepped beside NeMo's ``ConformerEncoder.cache_aware_stream_step`` on the same
features, fed as NeMo's ``CacheAwareStreamingAudioBuffer`` feeds it (tests/ is on sys.path; the encoders are NeMo's
and ours with the same weights: tests/models/test_streaming_nemo.py builds them, tests/finetune/test_nemo_streaming.py
imports a NeMo-saved ``.nemo``).

Where NeMo's step departs from NeMo's own whole-utterance forward on purpose (docs/streaming.md, "Exactness"):
NeMo's buffer pads the pre-encode cache with zero features while fewer than ``subsampling_factor + 1`` features
precede a chunk (the second chunk when a stream's first chunk is a single frame: right context 0, or regular
style): there NeMo's frames are measured against the forward ("departure") and NeMo continues from our caches;
at a stream's end in regular style NeMo's frames of a shortened chunk are not compared.
"""

from __future__ import annotations

import torch


def whole(nemo, ours, features, lengths, context):
    """NeMo's and our masked whole-utterance forwards under `context` (NeMo's default set to it) of (B, T, F)
    features: (NeMo's (B, T', D) frames, lengths, ours, lengths)."""
    nemo.set_default_att_context_size(context)
    theirs, their_lengths = nemo(audio_signal=features.transpose(1, 2), length=lengths)
    mine, my_lengths = ours(features, lengths, context)
    return theirs.transpose(1, 2), their_lengths, mine, my_lengths


def stream_both(nemo, ours, features, lengths, context) -> dict[str, float]:
    """Steps NeMo (as its streaming buffer does) and ours side by side; the largest differences seen."""
    _, _, reference, reference_lengths = whole(nemo, ours, features, lengths, context)  # also sets NeMo's context
    config, setup = nemo.streaming_cfg, ours.streaming_setup(context)
    batch, total = features.shape[0], int(lengths.max())
    cache_channel, cache_time, cache_len = nemo.get_initial_cache_state(batch_size=batch)
    state = ours.initial_state(batch, setup)
    theirs, mine = [[] for _ in range(batch)], [[] for _ in range(batch)]
    worst = {"frames": 0.0, "caches": 0.0, "departure": 0.0}
    position, step = 0, 0
    while position < total:
        first = step == 0
        size, shift = config.chunk_size[not first], config.shift_size[not first]
        pre = config.pre_encode_cache_size[not first]
        zero_padded = pre > position and not first  # NeMo's window starts before the stream
        window = features[:, max(0, position - pre) : position + size]
        window = torch.nn.functional.pad(window, (0, 0, max(0, pre - position), 0))
        window_lengths = (lengths - position + pre).clamp(0, window.shape[1])
        new = setup.first_chunk_frames if first else setup.chunk_frames
        start = position + size - new  # ours takes only the features it has not seen
        chunk = features[:, start : start + new]
        chunk_lengths = (lengths - start).clamp(0, chunk.shape[1])
        final = (chunk_lengths > 0) & (lengths <= start + new)
        frames, frame_lengths, cache_channel, cache_time, cache_len = nemo.cache_aware_stream_step(
            processed_signal=window.transpose(1, 2),
            processed_signal_length=window_lengths,
            cache_last_channel=cache_channel,
            cache_last_time=cache_time,
            cache_last_channel_len=cache_len,
            keep_all_outputs=position + size >= total,
            drop_extra_pre_encoded=0 if first else None,
        )
        my_frames, my_lengths, state = ours.step(chunk, chunk_lengths, state, setup, final)
        live = (chunk_lengths == new).tolist()
        exact = ((lengths >= position + size) | (config.cache_drop_size == 0)).tolist()  # see the docstring
        for row in range(batch):
            if exact[row]:
                theirs[row].append(frames[row].T[: frame_lengths[row]])
            mine[row].append(my_frames[row, : my_lengths[row]])
            if live[row] and zero_padded:
                done = sum(len(piece) for piece in mine[row]) - int(my_lengths[row])
                departure = (theirs[row][-1] - reference[row, done : done + len(theirs[row][-1])]).abs().max()
                worst["departure"] = max(worst["departure"], float(departure))
            elif live[row]:
                caches = [
                    (cache_channel[:, row] - state.cache_last_channel[:, row]).abs().max(),
                    (cache_time[:, row] - state.cache_last_time[:, row]).abs().max(),
                ]
                assert int(cache_len[row]) == int(state.cache_last_channel_len[row])
                worst["caches"] = max(worst["caches"], *map(float, caches))
        if zero_padded:  # NeMo continues from our caches, which are the whole-utterance forward's
            cache_channel, cache_time = state.cache_last_channel.clone(), state.cache_last_time.clone()
            for row in range(batch):
                theirs[row][-1] = mine[row][-1]  # a stream whose first chunk ran to its end is not zero padded
        position += shift
        step += 1
    for row in range(batch):
        length = int(reference_lengths[row])
        their_frames, my_frames = torch.cat(theirs[row])[:length], torch.cat(mine[row])
        assert len(my_frames) == length and len(their_frames) > length // 2
        worst["frames"] = max(worst["frames"], float((their_frames - my_frames[: len(their_frames)]).abs().max()))
        # and ours is the masked whole-utterance forward
        torch.testing.assert_close(my_frames, reference[row, :length], atol=1e-5, rtol=0)
    return worst
