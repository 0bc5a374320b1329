import { startService } from "@platform/service";
import { definition } from "./service";

void startService(definition, process.env, { installSignalHandlers: true });
