// A server on the official TypeScript SDK (v2) serving one skill through its Skills extension
// (SEP-2640), over stdio, for tests/skills.rs.
import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { SkillsExtension, memorySkillFiles } from "@modelcontextprotocol/server/ext/skills";

const files = {
  "pdf-processing/SKILL.md":
    "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nUse references/FORMS.md.\n",
  "pdf-processing/references/FORMS.md": "How to fill the forms.\n",
};
const catalog = await SkillsExtension.load(memorySkillFiles(files));
const server = new McpServer({ name: "ts-skills", version: "1.0.0" });
catalog.attach(server);
await server.connect(new StdioServerTransport());
