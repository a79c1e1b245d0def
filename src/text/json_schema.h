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

/* A rule table several schemas share (tool grammars: one schema per function, plus the
 * format's own rules). visit adds the rules for a schema under `name` (its rule is *rule,
 * valid until free); rule adds a hand-written one (the name escaped, and numbered when another
 * body has it: *final_name); print writes them all, sorted by name. */
typedef struct df_jsg df_jsg;
int df_jsg_create(df_jsg **out);
void df_jsg_free(df_jsg *g);
int df_jsg_visit(df_jsg *g, const char *schema_json, const char *name, const char **rule);
int df_jsg_rule(df_jsg *g, const char *name, const char *body, const char **final_name);
/* a GBNF literal for text (\r \n " \ escaped); of text as a JSON string (quoted, escaped).
 * Valid until free; NULL when out of memory. */
const char *df_jsg_literal(df_jsg *g, const char *text);
const char *df_jsg_json_literal(df_jsg *g, const char *text);
int df_jsg_print(df_jsg *g, char **out);

#endif
