/* Placeholder: filled in by the copy work. */
typedef int sw_copy_placeholder;
