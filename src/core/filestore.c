/* Placeholder: filled in by the filestore work. */
typedef int sw_filestore_placeholder;
