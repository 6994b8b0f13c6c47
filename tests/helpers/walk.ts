// The pagination tests' walker: follows each chunk's next link to the end, every chunk a 200, the walk bounded.

/** What the walker needs of a fetched chunk. */
export interface Fetched {
  status: number;
  body: any;
  /** The body as sent, for the message when the chunk is not a 200 (its JSON when absent). */
  text?: string;
}

/** The path and query of an href, which is what `get` is given: the walk is the same on app.request and a real server. */
function pathOfHref(href: string): string {
  const url = new URL(href);
  return url.pathname + url.search;
}

/**
 * Fetches `first`, then each chunk's `_links.next` until a chunk has none; returns the chunks' bodies in order.
 * `get` is given each path and the chunk's index. Throws on a chunk that is not a 200, and when a next link is
 * still there after `maxChunks` chunks, so that a cursor leading back into the walk fails the test instead of
 * hanging it.
 */
export async function followNext(first: string, get: (path: string, index: number) => Promise<Fetched>, maxChunks = 1000): Promise<any[]> {
  const chunks: any[] = [];
  let path: string | undefined = first;
  while (path !== undefined) {
    if (chunks.length === maxChunks) throw new Error(`No end to the walk from ${first}: a next link after ${maxChunks} chunks`);
    const { status, body, text } = await get(path, chunks.length);
    if (status !== 200)
      throw new Error(`Chunk ${chunks.length} of the walk from ${first} is a ${status}: ${path}: ${text ?? JSON.stringify(body)}`);
    chunks.push(body);
    const next: string | undefined = body._links?.next?.href;
    path = next === undefined ? undefined : pathOfHref(next);
  }
  return chunks;
}
