"""Ctrl-C during a long call raises KeyboardInterrupt at once: the binding
runs Python's signal handlers between blocks of the call's work."""
import os
import signal
import threading
import time

import numpy as np

import attnpool

# The signal's delay after the call starts, and the most the call may take
# after it (the binding polls every 20 ms; a block of work takes far less).
DELAY, LATE = 0.3, 1.0


def sized_for(seconds, make_call, largest):
    """make_call(scale) for a scale whose call takes about `seconds` (at
    most `largest`)."""
    scale = 1
    while True:
        start = time.perf_counter()
        make_call(scale)()
        took = time.perf_counter() - start
        if took > 0.05 or scale >= largest:
            return make_call(min(largest, max(scale, int(scale * seconds / took))))
        scale *= 4


def interrupted(call):
    """Runs call() with a SIGINT DELAY s in; the seconds from the signal to
    its KeyboardInterrupt (None if the call ended without one)."""
    sent = []

    def interrupt():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(DELAY, interrupt)
    timer.start()
    try:
        call()
    except KeyboardInterrupt:
        return time.perf_counter() - sent[0]
    finally:
        timer.cancel()
    return None


def pool_arrays(rng, scale):
    """Queries, keys and values of a pooling call that grows with scale."""
    return (rng.standard_normal((64 * scale, 16), dtype=np.float32),
            rng.standard_normal((4096, 16), dtype=np.float32),
            rng.standard_normal((4096, 8), dtype=np.float32))


def test_ctrl_c_interrupts_pooling_and_attention():
    rng = np.random.default_rng(11)

    def pool(scale):
        q, k, v = pool_arrays(rng, scale)
        return lambda: attnpool.attention_pool(q, k, v, threads=2)

    def sdpa(scale):
        q = rng.standard_normal((1, 2 * scale, 256, 64), dtype=np.float32)
        k = rng.standard_normal((1, 2 * scale, 2048, 64), dtype=np.float32)
        return lambda: attnpool.scaled_dot_product_attention(q, k, k, threads=2)

    # (Scales of at most a few hundred MB of inputs.)
    for make_call, largest in ((pool, 1 << 16), (sdpa, 512)):
        # (Uninterrupted, the call would end well past DELAY + LATE.)
        call = sized_for(2.5 * (DELAY + LATE), make_call, largest)
        latency = interrupted(call)
        print(make_call.__name__, "interrupted", latency, "s after the signal")
        assert latency is not None and latency < LATE
        # The next call runs as if nothing happened.
        assert attnpool.attention_pool(np.ones((1, 1), np.float32),
                                       np.ones((1, 1), np.float32),
                                       np.ones((1, 1), np.float32))[0, 0] == 1


def test_an_interrupted_call_leaves_out_as_it_was():
    rng = np.random.default_rng(12)

    def pool(scale):
        q, k, v = pool_arrays(rng, scale)
        out = np.full((len(q), 8), 7.0, np.float32)

        def call():
            attnpool.attention_pool(q, k, v, out=out, threads=2)
        call.out = out
        return call

    call = sized_for(2.5 * (DELAY + LATE), pool, 1 << 16)
    assert interrupted(call) is not None
    assert (call.out == 7).all()
