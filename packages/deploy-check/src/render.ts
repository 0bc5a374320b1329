import { execFileSync } from "node:child_process";
import path from "node:path";
import { parseAllDocuments } from "yaml";

export const REPO_ROOT = path.resolve(__dirname, "../../..");
export const OVERLAYS = ["dev", "prod"] as const;
export type Overlay = (typeof OVERLAYS)[number];

/** One rendered Kubernetes object (loosely typed: the rules below read what they check). */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: any };

/** `kubectl kustomize k8s/overlays/<overlay>` (Debian's kubectl, kustomize built in; no cluster, no network). */
export function render(overlay: Overlay): K8sObject[] {
  const out = execFileSync("kubectl", ["kustomize", path.join(REPO_ROOT, "k8s/overlays", overlay)], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  return parseAllDocuments(out)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${overlay}: ${doc.errors[0].message}`);
      return doc.toJS() as K8sObject;
    })
    .filter((o) => o !== null);
}

interface Validatable {
  validate(): void;
}
type ModelClass = new (data: any) => Validatable;

/** The package path of the kubernetes-models class of an apiVersion/kind (its JSON schema ships inside the package). */
function modelPath(apiVersion: string, kind: string): string {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

/**
 * Custom resources with no schema in kubernetes-models: checked by hand here (the fields the platform relies on).
 * CloudNativePG's Cluster: postgresql.cnpg.io/v1.
 */
const CUSTOM: Record<string, (o: K8sObject) => string[]> = {
  "postgresql.cnpg.io/v1/Cluster": (o) => {
    const problems: string[] = [];
    const spec = o.spec ?? {};
    if (!Number.isInteger(spec.instances) || spec.instances < 1) problems.push("spec.instances must be a positive integer");
    if (typeof spec.storage?.size !== "string") problems.push("spec.storage.size must be a quantity string");
    if (typeof spec.bootstrap?.initdb?.database !== "string") problems.push("spec.bootstrap.initdb.database is required");
    for (const role of spec.managed?.roles ?? []) {
      if (typeof role.name !== "string") problems.push("managed role without a name");
      if (!["present", "absent"].includes(role.ensure)) problems.push(`role ${role.name}: ensure must be present or absent`);
      if (typeof role.passwordSecret?.name !== "string") problems.push(`role ${role.name}: passwordSecret.name is required`);
    }
    const known = new Set(["instances", "imageName", "primaryUpdateStrategy", "enableSuperuserAccess", "storage", "postgresql", "bootstrap", "managed", "resources", "affinity", "backup", "monitoring"]);
    for (const key of Object.keys(spec)) if (!known.has(key)) problems.push(`spec.${key} is not a field this check knows`);
    return problems;
  },
};

/** Problems of one object against the Kubernetes OpenAPI schemas shipped in kubernetes-models (offline). */
export function validateObject(o: K8sObject): string[] {
  const custom = CUSTOM[`${o.apiVersion}/${o.kind}`];
  if (custom) return custom(o);
  let Model: ModelClass;
  try {
    const mod = require(modelPath(o.apiVersion, o.kind)) as Record<string, ModelClass>;
    Model = mod[o.kind];
  } catch {
    return [`no schema for ${o.apiVersion} ${o.kind}`];
  }
  try {
    new Model(o).validate();
    return [];
  } catch (err) {
    return [(err as Error).message];
  }
}
