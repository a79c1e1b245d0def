/* json_schema.h — JSON schema -> GBNF grammar (text/gbnf.h), the subset and the rule shapes of
 * llama.cpp's json-schema-to-grammar (common/json-schema-to-grammar.cpp there): the same
 * primitive rules (space, string, number, integer, boolean, null, value, object, array), the
 * same object layout (required properties in schema order, then optional ones as a chain of
 * "-rest" rules, additionalProperties only when true or a schema), the same names for the
 * generated rules, sorted by name. Supported: type (also arrays of types), properties, required,
 * additionalProperties, enum, const, items, prefixItems, minItems, maxItems, minLength,
 * maxLength, anyOf, oneOf, allOf (properties and enums merged), local $ref ("#/$defs/x",
 * "#/definitions/x", "#"), format date / time / date-time / uuid. Not enforced (the value is
 * only typed): pattern, minimum/maximum and the other numeric bounds; additional property names
 * may repeat a declared one. Remote $ref is an error.
 * Threading: reentrant. */
#ifndef DF_JSON_SCHEMA_H
#define DF_JSON_SCHEMA_H

/* schema_json: a JSON schema (object, or true / {} for any value). *out: the grammar text
 * (malloc'ed), start rule "root". DF_ERR_FORMAT with a message naming the problem. */
int df_json_schema_to_gbnf(const char *schema_json, char **out);

#endif
