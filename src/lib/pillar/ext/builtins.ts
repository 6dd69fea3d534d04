/** brine's built-in external pillar modules: importing this registers them (see ../ext-pillar.ts). */
import "./cmd.js";
import "./file-tree.js";
import "./git.js";
