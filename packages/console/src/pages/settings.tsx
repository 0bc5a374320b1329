import { useLayoutEffect, useState } from "react";
import { get, patch, type Organization } from "../api";
import { Field, FormError, LoadError, ReadOnlyNote, Section, useCanWrite, useLoad, useSubmit } from "../ui";

export function SettingsPage() {
  const canWrite = useCanWrite();
  const { data: org, error, reload } = useLoad(() => get<Organization>("/organization"));
  const [name, setName] = useState("");
  const [perSecond, setPerSecond] = useState("");
  const [burst, setBurst] = useState("");
  const [keywords, setKeywords] = useState("");
  const [saved, setSaved] = useState(false);
  // The fields take the loaded values in the same commit as the load (a layout effect, not a passive one that runs
  // after paint), so nothing typed after the form shows them can be overwritten by them.
  useLayoutEffect(() => {
    if (!org) return;
    setName(org.name);
    setPerSecond(String(org.rateLimit.perSecond));
    setBurst(String(org.rateLimit.burst));
    setKeywords(org.optOutKeywords.join(", "));
  }, [org]);
  const form = useSubmit(async () => {
    setSaved(false);
    await patch("/organization", {
      name,
      rateLimit: { perSecond: Number(perSecond), burst: Number(burst) },
      optOutKeywords: keywords.split(",").map((k) => k.trim()).filter(Boolean),
    });
    // "Saved." once the form shows what was stored: the reload resets every field, so an edit made between the
    // answer and the reload would be silently replaced (the console test lost its next edit that way).
    await reload();
    setSaved(true);
  }, ["name", "rateLimit", "optOutKeywords"]);

  return (
    <>
      <LoadError error={error} />
      {!canWrite && <ReadOnlyNote />}
      {org && (
        <Section title="Settings" testId="organization-settings">
          <dl className="facts">
            <dt>Organization id</dt>
            <dd>
              <code>{org.id}</code>
            </dd>
            <dt>Plan</dt>
            <dd data-testid="plan">{org.plan} (set by the operator)</dd>
          </dl>
          <form onSubmit={form.onSubmit} aria-label="Organization settings">
            <fieldset disabled={!canWrite}>
              <Field label="Name" errors={form.fieldErrors("name")}>
                {(id, d) => <input id={id} aria-describedby={d} value={name} onChange={(e) => setName(e.target.value)} />}
              </Field>
              <Field label="Rate limit: requests per second" errors={form.fieldErrors("rateLimit.perSecond")}>
                {(id, d) => <input id={id} aria-describedby={d} inputMode="numeric" value={perSecond} onChange={(e) => setPerSecond(e.target.value)} />}
              </Field>
              <Field label="Rate limit: burst" errors={form.fieldErrors("rateLimit.burst")}>
                {(id, d) => <input id={id} aria-describedby={d} inputMode="numeric" value={burst} onChange={(e) => setBurst(e.target.value)} />}
              </Field>
              <Field label="Opt-out keywords" errors={form.fieldErrors("optOutKeywords")} hint="Comma-separated; matched case-insensitively against whole inbound messages.">
                {(id, d) => <input id={id} aria-describedby={d} value={keywords} onChange={(e) => setKeywords(e.target.value)} />}
              </Field>
              <FormError failure={form.formError} />
              {canWrite && (
                <button type="submit" disabled={form.busy}>
                  Save settings
                </button>
              )}
              {saved && <span role="status"> Saved.</span>}
            </fieldset>
          </form>
        </Section>
      )}
    </>
  );
}
