"""flash_attn_with_kvcache on CUDA tensors: KV-cache decoding with flashlab's decode kernel (gpu/decode/),
flash-attn's names and conventions. Inference only (no autograd): the caches are updated in place.

    out = flashlab.flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new,
                                           cache_seqlens=lens, causal=True)

  q                 (batch, q_len, heads_q, head_dim), bf16 or fp16, CUDA, contiguous
  k_cache, v_cache  (batch, cache_len, heads_kv, head_dim), or (num_pages, page_size, heads_kv, head_dim)
                    with block_table (batch, max_pages) int32
  k, v              (batch, new_len, heads_kv, head_dim) appended at cache_seqlens (in place), or None
  rotary_cos/sin    (rows, rotary_dim / 2): rotary on q and k at their positions (interleaved or half)
  cache_seqlens     (batch,) int32 tensor, or an int for every entry; with the new rows they must fit the
                    cache (not checked on the device, as in flash-attn)
  num_splits        0: the split heuristic (gpu/shapes.hpp decode_split_count); n: n splits
"""
import ctypes

from . import _abi


def _ptr(x):
    return None if x is None else x.data_ptr()


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, block_table=None, softmax_scale=None, causal=False, softcap=0.0,
                            rotary_interleaved=True, num_splits=0, return_softmax_lse=False):
    import torch

    tensors = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "k": k, "v": v, "rotary_cos": rotary_cos,
               "rotary_sin": rotary_sin, "block_table": block_table}
    for name, x in tensors.items():
        if x is None:
            continue
        if not isinstance(x, torch.Tensor) or not x.is_cuda:
            raise ValueError(f"{name} must be a CUDA tensor: flash_attn_with_kvcache runs the GPU decode kernel "
                             "(`flashlab check --decode` runs the CPU implementations)")
        if not x.is_contiguous():
            raise ValueError(f"{name} is not contiguous: pass {name}.contiguous()")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"q is {q.dtype}: the decode kernel runs bf16 and fp16 (q.to(torch.bfloat16))")
    for name in ("k_cache", "v_cache", "k", "v", "rotary_cos", "rotary_sin"):
        x = tensors[name]
        if x is not None and x.dtype != q.dtype:
            raise TypeError(f"{name} is {x.dtype} but q is {q.dtype}: pass one dtype")
    if q.dim() != 4 or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"q {tuple(q.shape)} must be (batch, q_len, heads, dim) and k_cache, v_cache one shape "
                         f"(got {tuple(k_cache.shape)}, {tuple(v_cache.shape)})")
    if (k is None) != (v is None):
        raise ValueError("pass both k and v (the rows to append), or neither")
    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError("pass both rotary_cos and rotary_sin, or neither")
    if rotary_cos is not None and k is None:
        raise ValueError("rotary needs k and v to append (flash-attn rotates q and the new keys)")
    batch, q_len, heads_q, head_dim = q.shape
    heads_kv = k_cache.shape[2]
    if heads_q % heads_kv:
        raise ValueError(f"heads_q {heads_q} is not a multiple of heads_kv {heads_kv}")
    paged = block_table is not None
    if paged and (block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch):
        raise ValueError(f"block_table must be int32 (batch, max_pages), got {block_table.dtype} "
                         f"{tuple(block_table.shape)}")
    if cache_seqlens is None:
        cache_seqlens = 0 if k is not None else (k_cache.shape[1] if not paged else None)
        if cache_seqlens is None:
            raise ValueError("a paged cache needs cache_seqlens")
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=q.device)
    if cache_seqlens.dtype != torch.int32 or cache_seqlens.shape != (batch,):
        raise ValueError(f"cache_seqlens must be an int32 tensor of shape ({batch},)")
    new_len = 0 if k is None else k.shape[1]
    # The split heuristic sizes the splits by the cache's capacity, as flash-attn does: reading the
    # lengths back from the device would cost a synchronization every call. cache_seqlens + new rows
    # must fit the cache (the caller's contract, as in flash-attn; `flashlab check --decode` validates).
    max_seqlen_k = block_table.shape[1] * k_cache.shape[1] if paged else k_cache.shape[1]

    out = torch.empty_like(q)
    lse = torch.empty((batch, heads_q, q_len), dtype=torch.float32, device=q.device)
    c = _abi.new_decode()
    c.batch, c.heads_q, c.heads_kv, c.head_dim, c.q_len = batch, heads_q, heads_kv, head_dim, q_len
    c.cache_len = 0 if paged else k_cache.shape[1]
    c.page_size = k_cache.shape[1] if paged else 0
    c.max_pages = block_table.shape[1] if paged else 0
    c.new_len, c.max_seqlen_k = new_len, max_seqlen_k
    c.rotary = 0 if rotary_cos is None else (1 if rotary_interleaved else 2)
    c.rotary_dim = 0 if rotary_cos is None else 2 * rotary_cos.shape[1]
    c.num_splits = int(num_splits)
    c.dtype = _abi.BF16 if q.dtype == torch.bfloat16 else _abi.FP16
    c.causal = int(bool(causal))
    c.scale = float(softmax_scale or 0.0)
    c.softcap = float(softcap)
    c.q, c.o, c.lse = q.data_ptr(), out.data_ptr(), lse.data_ptr()
    c.k_cache, c.v_cache, c.block_table = k_cache.data_ptr(), v_cache.data_ptr(), _ptr(block_table)
    c.cache_seqlens = cache_seqlens.data_ptr()
    c.k_new, c.v_new = _ptr(k), _ptr(v)
    c.rotary_cos, c.rotary_sin = _ptr(rotary_cos), _ptr(rotary_sin)
    c.stream = torch.cuda.current_stream(q.device).cuda_stream
    splits = ctypes.c_int32(0)
    with torch.cuda.device(q.device):
        _abi.call(_abi.lib().flashlab_decode_v1, ctypes.byref(c), ctypes.byref(splits))
    flash_attn_with_kvcache.last_num_splits = splits.value
    return (out, lse) if return_softmax_lse else out
