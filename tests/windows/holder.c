/* A Windows program that holds a file open as an antivirus scanner does, for the Wine test:
 * read access, sharing reads only (no FILE_SHARE_DELETE or FILE_SHARE_WRITE), so nothing may
 * delete or rename the file while it is held.
 *
 * Usage: holder.exe PATH MILLISECONDS. Prints "held" once it holds the file, then closes it
 * after MILLISECONDS. Built by `cargo xtask windows`; never shipped. */
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>

int wmain(int argc, wchar_t **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: holder.exe PATH MILLISECONDS\n");
        return 2;
    }
    HANDLE h = CreateFileW(argv[1], GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        printf("error %lu\n", GetLastError());
        return 1;
    }
    printf("held\n");
    fflush(stdout);
    Sleep((DWORD)_wtoi(argv[2]));
    CloseHandle(h);
    return 0;
}
