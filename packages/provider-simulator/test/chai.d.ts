/**
 * Types for the part of chai 6 these tests use. chai 6 ships no declarations
 * and @types/chai is not installed in the workspace; a typed subset keeps the
 * tests free of `any` without touching the root package.json.
 */
declare module "chai" {
  interface Assertion {
    to: Assertion;
    be: Assertion;
    been: Assertion;
    is: Assertion;
    that: Assertion;
    and: Assertion;
    has: Assertion;
    have: Assertion;
    with: Assertion;
    at: Assertion;
    of: Assertion;
    not: Assertion;
    deep: Assertion;
    true: Assertion;
    false: Assertion;
    undefined: Assertion;
    null: Assertion;
    empty: Assertion;
    equal(value: unknown, message?: string): Assertion;
    eql(value: unknown, message?: string): Assertion;
    include(value: unknown, message?: string): Assertion;
    members(values: readonly unknown[], message?: string): Assertion;
    property(name: string, value?: unknown, message?: string): Assertion;
    length(n: number, message?: string): Assertion;
    lengthOf(n: number, message?: string): Assertion;
    match(re: RegExp, message?: string): Assertion;
    a(type: string, message?: string): Assertion;
    an(type: string, message?: string): Assertion;
    lessThan(n: number, message?: string): Assertion;
    greaterThan(n: number, message?: string): Assertion;
    least(n: number, message?: string): Assertion;
    most(n: number, message?: string): Assertion;
    above(n: number, message?: string): Assertion;
    below(n: number, message?: string): Assertion;
  }
  export function expect(value: unknown, message?: string): Assertion;
}
