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


def sized_for(seconds, make_call):
    """make_call(scale) for a scale whose call takes about `seconds`."""
    scale = 1
    while True:
        start = time.perf_counter()
        make_call(scale)()
        took = time.perf_counter() - start
        if took > 0.05:
            return make_call(max(scale, int(scale * seconds / took)))
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


def test_ctrl_c_interrupts_pooling_and_attention():
    rng = np.random.default_rng(11)

    def pool(scale):
        q = rng.standard_normal((64 * scale, 16), dtype=np.float32)
        k = rng.standard_normal((4096, 16), dtype=np.float32)
        v = rng.standard_normal((4096, 8), dtype=np.float32)
        return lambda: attnpool.attention_pool(q, k, v, threads=2)

    def sdpa(scale):
        q = rng.standard_normal((1, 2 * scale, 256, 64), dtype=np.float32)
        k = rng.standard_normal((1, 2 * scale, 2048, 64), dtype=np.float32)
        return lambda: attnpool.scaled_dot_product_attention(q, k, k, threads=2)

    for make_call in (pool, sdpa):
        call = sized_for(5 * (DELAY + LATE), make_call)
        latency = interrupted(call)
        print(make_call.__name__, "interrupted", latency, "s after the signal")
        assert latency is not None and latency < LATE
        # The next call runs as if nothing happened.
        assert attnpool.attention_pool(np.ones((1, 1), np.float32),
                                       np.ones((1, 1), np.float32),
                                       np.ones((1, 1), np.float32))[0, 0] == 1
