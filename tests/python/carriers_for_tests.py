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
