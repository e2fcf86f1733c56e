/* Placeholder: filled in by the dlpack work. */
typedef int sw_dlpack_placeholder;
