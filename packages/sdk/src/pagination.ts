/** One page of a list endpoint: `{items, nextCursor?}` (the contract's `page()`). */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/**
 * Every item of a cursor-paginated list, fetched page by page as it is consumed:
 * `for await (const contact of client.contacts.list())`. `pages()` walks whole pages;
 * `toArray()` collects (optionally at most `max` items).
 */
export class PageIterator<T> implements AsyncIterable<T> {
  constructor(
    private readonly fetchPage: (cursor: string | undefined) => Promise<Page<T>>,
    private readonly startCursor?: string,
  ) {}

  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let cursor = this.startCursor;
    for (;;) {
      const page = await this.fetchPage(cursor);
      yield page;
      if (!page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.items;
  }

  async toArray(max = Infinity): Promise<T[]> {
    const out: T[] = [];
    if (max <= 0) return out;
    for await (const item of this) {
      out.push(item);
      if (out.length >= max) break;
    }
    return out;
  }
}
