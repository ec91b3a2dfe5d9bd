"""The order the A/B and race scripts time their calls in (ab_libs.py, decode_ab.py, decode_compare.py).

A call's place in the order biases its reading: on an H200 the call timed right after another read 1-3% slower
(bench/README.md, "ab_libs.py"). So each script times its calls in rounds, round r starting at call r (mod the
calls), and reads each call's median: with as many rounds as calls, every call takes every place once.
"""


def rotating(items, rounds):
    """`items` `rounds` times over, round r starting at item r (mod len(items))."""
    items = list(items)
    for r in range(rounds if items else 0):
        k = r % len(items)
        yield from items[k:] + items[:k]
