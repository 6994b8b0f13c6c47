// Checks real responses against the OpenAPI document: its operation's response for the status, the media type,
// the body against the schema (Ajv in JSON Schema 2020-12 mode, formats checked), and every required header.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;

type Schema = Record<string, any>;

export interface ResponseCheck {
  /** What was wrong, one line each; empty when the response is as documented. */
  readonly errors: string[];
  /** The schema the body matched: the one of a `oneOf` of chunks, or the one referenced (e.g. "ProductsOffsetChunk"). */
  readonly matched?: string;
}

/** A checker of responses against `document` (as GET /openapi.json serves it). */
export function documentChecker(document: Schema) {
  // strictRequired off: a rule such as `anyOf: [{ required: ['prev'] }, …]` names properties defined beside it.
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true });
  addFormats(ajv);
  // The document's schemas become the $defs of one schema, so that their "#/components/schemas/X" refs resolve.
  const defs = JSON.parse(JSON.stringify(document.components.schemas).replaceAll('"#/components/schemas/', '"#/$defs/'));
  ajv.addSchema({ $id: 'openapi', $defs: defs });
  const compiled = new Map<unknown, ValidateFunction>();
  const compile = (schema: Schema): ValidateFunction => {
    let validate = compiled.get(schema);
    if (validate === undefined) {
      validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"openapi#/$defs/')));
      compiled.set(schema, validate);
    }
    return validate;
  };

  /** Validates a value against a schema of the document (a component name, or a schema object). */
  function validate(schema: Schema | string, value: unknown): string[] {
    const check = compile(typeof schema === 'string' ? { $ref: `#/components/schemas/${schema}` } : schema);
    return check(value) ? [] : (check.errors ?? []).map((e) => `${e.instancePath || '(body)'} ${e.message} ${JSON.stringify(e.params)}`);
  }

  /** `path` as the document names it ("/v1/products", "/admin/keys/{id}"). */
  function check(method: string, path: string, response: { status: number; headers: Headers; body: unknown }): ResponseCheck {
    const operation = document.paths[path]?.[method.toLowerCase()];
    if (!operation) return { errors: [`${method} ${path} is not in the document`] };
    // The status itself, else its range ("4XX"), else the default; a response may be a reference to components.responses.
    const listed =
      operation.responses[String(response.status)] ?? operation.responses[`${String(response.status)[0]}XX`] ?? operation.responses.default;
    const documented = listed?.$ref === undefined ? listed : document.components.responses[listed.$ref.split('/').at(-1)];
    if (!documented) return { errors: [`${method} ${path}: status ${response.status} is not documented`] };
    const errors: string[] = [];
    for (const [name, header] of Object.entries<Schema>(documented.headers ?? {})) {
      const value = response.headers.get(name);
      if (value === null) {
        if (header.required) errors.push(`header ${name} is missing`);
        continue;
      }
      const typed = header.schema.type === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value;
      for (const error of validate(header.schema, typed)) errors.push(`header ${name}: ${value}: ${error}`);
    }
    const content = documented.content as Record<string, { schema: Schema }> | undefined;
    if (content === undefined) {
      if (response.body !== undefined && response.body !== '') errors.push('a body where the document has none');
      return { errors };
    }
    const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
    const media = content[type];
    if (!media) return { errors: [...errors, `content type ${type} is not one of ${Object.keys(content).join(', ')}`] };
    errors.push(...validate(media.schema, response.body));
    let matched: string | undefined;
    for (const option of (media.schema.oneOf ?? [media.schema]) as Schema[]) {
      if (option.$ref === undefined) continue;
      if (validate(option, response.body).length === 0) matched = option.$ref.split('/').at(-1);
    }
    return { errors, matched };
  }

  return { check, validate };
}
