/* Placeholder translation unit for a module whose sources are not written yet. */
typedef int kq_empty_translation_unit;
