/* Runs one Lua script with the standard libraries: the driver of the Lua interpreter's
 * sources (lua-src ships the library, not lua.c). */
#include <stdio.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRIPT\n", argv[0]);
        return 2;
    }
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    int rc = luaL_dofile(L, argv[1]);
    if (rc != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
    }
    lua_close(L);
    return rc == LUA_OK ? 0 : 1;
}
