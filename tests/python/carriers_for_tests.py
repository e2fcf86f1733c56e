"""Test-only helpers shared by several test files (no tests here).

Defined once so every DLPack test talks to the same carrier and the same
ctypes capsule bindings instead of a private copy per file.
"""

import ctypes

import strideweave as sw


class Foreign(sw.Carrier):
    """C-2's DLPack-test carrier: aliases a CPU carrier, reports `device`."""

    def __init__(self, cpu, info=None):
        super().__init__()
        self.cpu = cpu
        self.info = info

    def size(self):
        return self.cpu.size()

    def dtype(self):
        return self.cpu.dtype()

    def get_value(self, i):
        return self.cpu[i]

    def dlpack_info(self):
        if self.info is not None:
            return self.info(self)
        return {"pointer": self.cpu.pointer(), "device_type": 2, "device_id": 0}


# ---- PyCapsule access for DLPack capsule tests -------------------------------

capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_is_valid.restype = ctypes.c_int
capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_get_pointer.restype = ctypes.c_void_p
capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
capsule_set_name.restype = ctypes.c_int
capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]


def state_seen_from_a_thread(seen, at=1):
    """A slot hook `(carrier, i)` that, at slot `at`, reads the carrier's
    version and released flag from another thread into `seen` and joins it:
    were a core lock of the carrier held while the hook runs, that thread's
    state calls would wait for it and the join would time out."""
    import threading

    def look(carrier, i):
        if i == at:
            th = threading.Thread(target=lambda: seen.append(
                (carrier.version, carrier.is_released())))
            th.start()
            th.join(timeout=60)
            assert not th.is_alive()
    return look
