/* A source for the attnpool_c shared library, whose code all comes from
 * the static library (linked whole). */
typedef int attnpool_c_empty_translation_unit;
