"""Running the kernels under Triton's interpreter (``TRITON_INTERPRET=1``: CPU tensors, numpy underneath).

Triton 3.6's interpreter converts a scalar tensor to a Python int with ``int(array)`` on a one-element 1-D
array, which numpy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so every
loop with a runtime bound fails (triton-lang/triton#9171, fixed after 3.6). ``fix_scalar_index`` wraps the
interpreter's tensor patching so that conversion takes the single element instead; it changes nothing when
the interpreter is not in use or numpy still accepts the conversion.
"""

from __future__ import annotations

import numpy as np


def scalar_index_broken() -> bool:
    try:
        int(np.array([1]))
    except TypeError:
        return True
    return False


def fix_scalar_index() -> None:
    """Make the interpreter's ``tensor.__index__`` read the one element (idempotent)."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "asr_plugin_fixed", False) or not scalar_index_broken():
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patch_lang_tensor.asr_plugin_fixed = True
    interpreter._patch_lang_tensor = patch_lang_tensor
