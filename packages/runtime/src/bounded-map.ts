/**
 * A Map of at most `max` entries for in-process caches: `set` makes its key the newest, and past `max` the oldest
 * entry goes.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly max: number) {
    super();
  }

  override set(key: K, value: V): this {
    super.delete(key);
    super.set(key, value);
    if (this.size > this.max) super.delete(super.keys().next().value as K);
    return this;
  }
}
