import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

/**
 * The console is served by the gateway under /console (its dist/ copied into the gateway's dist/public/console at the
 * gateway's build). Everything is bundled: no CDN, no web font, so it works offline. Hashed file names under
 * assets/ are cached immutably by the gateway.
 */
export default defineConfig({
  base: "/console/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    // No inline <script>/<style>: the gateway's CSP is `self` only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1024,
  },
});
