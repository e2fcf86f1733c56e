/* Placeholder: filled in by the layout work. */
typedef int sw_layout_placeholder;
